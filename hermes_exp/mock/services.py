"""What the mock server answers besides chat completions, so the offline demo can use every toolset:
a SearXNG-compatible search (`GET /search?q=...&format=json`), an OpenAI-compatible images endpoint
(`POST /v1/images/generations`) and a small web site under `/site/` (pages, an image, a form) that
web_extract and the browser can read. Deterministic: the same request gets the same answer."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import struct
import zlib
from urllib.parse import parse_qs

Answer = tuple[int, str, bytes]  # status, content type, body

PAGES = {
    "index": ("Mock Library", "Welcome to the mock library. It has pages about <a href=\"/site/cats.html\">cats</a>, "
              "<a href=\"/site/python.html\">Python</a> and <a href=\"/site/weather.html\">the weather</a>, "
              "and a <a href=\"/site/form.html\">guest book</a>."),
    "cats": ("Cats", "Cats are small carnivorous mammals. They sleep for twelve to sixteen hours a day and purr "
             "when content. A group of cats is called a clowder. <img src=\"/site/cat.png\" alt=\"a cat\">"),
    "python": ("Python", "Python is a programming language created by Guido van Rossum and first released in "
               "1991. Its reference implementation is CPython. <a href=\"/site/index.html\">Back</a>"),
    "weather": ("Weather", "Today in Mockville: sunny, 21 degrees Celsius, light wind from the west. Tomorrow: "
                "clouds and a chance of rain in the afternoon."),
}
FORM = ("<form action=\"/site/submit\" method=\"post\"><label for=\"name\">Name</label>"
        "<input id=\"name\" name=\"name\" type=\"text\"><label for=\"message\">Message</label>"
        "<textarea id=\"message\" name=\"message\"></textarea><button type=\"submit\">Sign</button></form>")


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A valid PNG of one colour (no imaging library needed)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def _page(title: str, body: str) -> bytes:
    doc = (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title></head>"
           f"<body><nav><a href=\"/site/index.html\">Home</a></nav><main><article><h1>{html.escape(title)}</h1>"
           f"<p>{body}</p></article></main></body></html>")
    return doc.encode()


def _json(status: int, payload: object) -> Answer:
    return status, "application/json", json.dumps(payload, ensure_ascii=False).encode()


def search(query: str, root: str) -> Answer:
    """SearXNG's JSON shape; every page matching a word of the query, else the index."""
    words = {w.lower().strip("?.,!:") for w in query.split() if len(w) > 3}
    hits = [name for name, (title, text) in PAGES.items() if words & set((title + " " + text).lower().split())]
    results = [{"title": PAGES[n][0], "url": f"{root}/site/{n}.html", "engine": "mock",
                "content": re.sub("<[^>]+>", "", PAGES[n][1]).split(". ")[0] + "."} for n in hits or ["index"]]
    return _json(200, {"query": query, "number_of_results": len(results), "results": results})


def images(raw: bytes) -> Answer:
    try:
        body = json.loads(raw)
        prompt = str(body["prompt"])
    except (ValueError, KeyError, TypeError):
        return _json(400, {"error": {"message": "send JSON with a `prompt`", "type": "invalid_request_error"}})
    rgb = tuple(hashlib.blake2b(prompt.encode(), digest_size=3).digest())
    data = base64.b64encode(png(8, 8, rgb)).decode()  # type: ignore[arg-type]
    return _json(200, {"created": 0, "data": [{"b64_json": data, "revised_prompt": f"A picture of {prompt}"}]})


def site(path: str, query: str, raw: bytes, method: str) -> Answer:
    name = path.removeprefix("/site").strip("/").removesuffix(".html") or "index"
    if name == "cat.png":
        return 200, "image/png", png(16, 12, (200, 120, 40))
    if name == "form":
        return 200, "text/html; charset=utf-8", _page("Guest book", "Sign the guest book: " + FORM)
    if name == "submit":
        fields = parse_qs(raw.decode("utf-8", "replace") if method == "POST" else query)
        who = html.escape((fields.get("name") or ["nobody"])[0])
        said = html.escape((fields.get("message") or [""])[0])
        return 200, "text/html; charset=utf-8", _page("Thank you", f"Thank you, {who}. You wrote: {said}")
    if name in PAGES:
        return 200, "text/html; charset=utf-8", _page(*PAGES[name])
    return 404, "text/html; charset=utf-8", _page("Not found", f"No page {html.escape(path)}.")


def answer(method: str, path: str, query: str, raw: bytes, root: str) -> Answer | None:
    """The answer for a non-chat route, or None when the route is not one of these."""
    if method == "GET" and path == "/search":
        return search((parse_qs(query).get("q") or [""])[0], root)
    if method == "POST" and path == "/v1/images/generations":
        return images(raw)
    if path == "/site" or path.startswith("/site/"):
        return site(path, query, raw, method)
    return None
