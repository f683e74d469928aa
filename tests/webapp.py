"""A small local web app for the browser tests: a sign-up form that posts back a greeting, a second page,
an image, console output, a tall page to scroll, and a redirect to a URL the tests deny."""

from __future__ import annotations

import html
import threading
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from httpd import QuietHandler

PIXEL = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                      "1f15c4890000000d49444154789c6360f8cf000000030101005b1a0f5c0000000049454e44ae426082")

FORM = """<!doctype html><html><head><title>Sign up</title></head><body>
<h1>Sign up</h1>
<form action="/submit" method="post">
  <label>Name <input name="name"></label>
  <label>City <input name="city"></label>
  <button type="submit">Send</button>
</form>
<a href="/about">About us</a>
<img src="/cat.png" alt="a cat" width="10" height="10">
<div style="height: 4000px">tall</div>
<p>bottom of the page</p>
<script>console.log("hello from the form page"); console.warn("careful"); setTimeout(() => { throw new Error("boom later") }, 0);</script>
</body></html>"""


HTML = "text/html; charset=utf-8"


class Handler(QuietHandler):
    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/":
            self._send(200, HTML, FORM.encode())
        elif path == "/about":
            self._send(200, HTML, b"<!doctype html><title>About</title><h1>About us</h1><p>We test browsers.</p>")
        elif path == "/cat.png":
            self._send(200, "image/png", PIXEL)
        elif path == "/to-denied":
            self._send(302, HTML, b"", {"Location": self.server.denied_url})  # type: ignore[attr-defined]
        else:
            self._send(404, HTML, b"<h1>not found</h1>")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        form = parse_qs(self.rfile.read(length).decode())
        self.server.submissions.append(form)  # type: ignore[attr-defined]
        name = html.escape(form.get("name", ["nobody"])[0])
        city = html.escape(form.get("city", ["nowhere"])[0])
        self._send(200, HTML, f"<!doctype html><title>Thanks</title><h1>Thanks, {name} from {city}</h1>".encode())


class WebApp:
    """Serves the app on 127.0.0.1 in a thread; `submissions` records every form posted."""

    def __init__(self, denied_url: str = "http://127.0.0.2:8081/secret") -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.submissions = []  # type: ignore[attr-defined]
        self.server.denied_url = denied_url  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def submissions(self) -> list[dict[str, list[str]]]:
        return self.server.submissions  # type: ignore[attr-defined]

    def __enter__(self) -> "WebApp":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
