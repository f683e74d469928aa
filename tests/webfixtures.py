"""Real HTTP servers on 127.0.0.1 for the web, vision and image tools: pages (with a redirect loop, a
huge page, a PDF, a slow page), a fake SearXNG, fake Brave and Tavily APIs and a fake images endpoint.
Every request is recorded (method, path, query, headers, body) so tests can check what was sent."""

from __future__ import annotations

import base64
import json
import threading
import time
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

from httpd import QuietHandler

from hermes_exp.mock.services import png

ARTICLE = ("<html><head><title>The Otter Page</title></head><body><nav>Home | About | Login</nav><main>"
           "<article><h1>River otters</h1><p>River otters are semiaquatic mammals that live along rivers and "
           "lakes. They eat fish, crayfish and frogs, and they can hold their breath for eight minutes.</p>"
           "<p>See also <a href=\"/other.html\">sea otters</a>.</p></article></main>"
           "<footer>Copyright nobody</footer></body></html>")
PDF = b"%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"
IMAGE = png(16, 12, (10, 200, 30))


class Recorder(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []
        self.root = f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(QuietHandler):
    server: Recorder

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def _answer(self) -> None:
        parts = urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.requests.append({"method": self.command, "path": parts.path, "query": parse_qs(parts.query),
                                     "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
        route = ROUTES.get(parts.path)
        if route is None:
            return self._send(404, "text/html", b"<html><body>missing</body></html>")
        route(self)

    def _json(self, payload: Any, status: int = 200) -> None:
        self._send(status, "application/json", json.dumps(payload).encode())


def _huge_streamed(h: _Handler) -> None:
    """3 MB of HTML without a Content-Length: the limit must cut the stream, not trust a header."""
    h.send_response(200)
    h.send_header("Content-Type", "text/html")
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    chunk = b"<p>" + b"otters " * 4000 + b"</p>"
    try:
        for _ in range(110):
            h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        h.wfile.write(b"0\r\n\r\n")
    except OSError:  # the client stopped reading at its limit
        pass


def _brave(h: _Handler) -> None:
    if h.headers.get("X-Subscription-Token") != "brave-test-key":
        return h._json({"type": "ErrorResponse", "error": {"detail": "bad token"}}, 401)
    q = parse_qs(urlsplit(h.path).query)["q"][0]
    h._json({"type": "search", "web": {"results": [
        {"title": f"Brave result for {q}", "url": "https://example.org/brave", "description": "from brave"},
        {"title": "Second", "url": "https://example.org/two", "description": "two"}]}})


def _tavily(h: _Handler) -> None:
    if h.headers.get("Authorization") != "Bearer tavily-test-key":
        return h._json({"detail": {"error": "Unauthorized"}}, 401)
    body = json.loads(h.server.requests[-1]["body"])
    h._json({"query": body["query"], "results": [
        {"title": "Tavily hit", "url": "https://example.org/tavily", "content": "from tavily", "score": 0.9}]})


def _searxng(h: _Handler) -> None:
    q = parse_qs(urlsplit(h.path).query)
    if q.get("format") != ["json"]:
        return h._send(403, "text/html", b"format not allowed")
    h._json({"query": q["q"][0], "number_of_results": 3, "results": [
        {"title": f"Otters {i}", "url": f"https://example.org/otter/{i}", "content": f"snippet {i}",
         "engine": "fake"} for i in range(3)]})


def _images(h: _Handler) -> None:
    body = json.loads(h.server.requests[-1]["body"])
    if h.headers.get("Authorization") != "Bearer img-test-key":
        return h._json({"error": {"message": "bad key"}}, 401)
    if body.get("prompt") == "fail please":
        return h._json({"error": {"message": "content policy"}}, 400)
    if body.get("response_format") == "url":
        return h._json({"created": 1, "data": [{"url": h.server.root + "/generated.png"}]})
    h._json({"created": 1, "data": [{"b64_json": base64.b64encode(IMAGE).decode(), "revised_prompt": "rev"}]})


ROUTES = {
    "/article.html": lambda h: h._send(200, "text/html; charset=utf-8", ARTICLE.encode()),
    "/hop": lambda h: h._send(302, "text/html", b"", {"Location": "/article.html"}),
    "/loop": lambda h: h._send(302, "text/html", b"", {"Location": "/loop"}),
    "/huge.html": lambda h: h._send(200, "text/html", b"<html><body>" + b"x" * 3_000_000 + b"</body></html>"),
    "/huge-streamed.html": _huge_streamed,
    "/doc.pdf": lambda h: h._send(200, "application/pdf", PDF),
    "/notes.txt": lambda h: h._send(200, "text/plain; charset=utf-8", b"plain notes"),
    "/slow.html": lambda h: (time.sleep(3), h._send(200, "text/html", ARTICLE.encode())),
    "/empty.html": lambda h: h._send(200, "text/html", b"<html><body></body></html>"),
    "/picture.png": lambda h: h._send(200, "image/png", IMAGE),
    "/generated.png": lambda h: h._send(200, "image/png", IMAGE),
    "/searxng/search": _searxng,
    "/brave/search": _brave,
    "/tavily/search": _tavily,
    "/v1/images/generations": _images,
}


@contextmanager
def web_server() -> Iterator[Recorder]:
    server = Recorder()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
