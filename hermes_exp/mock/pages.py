"""The mock server's pages for the browser toolset (under /browser/): a sign-up form whose POST answers
with a greeting, so the offline demo fills in and submits a real form in a real Chromium."""

from __future__ import annotations

import html
from urllib.parse import parse_qs

PREFIX = "/browser"
FORM = b"""<!doctype html><html><head><title>hermes-exp demo form</title></head><body>
<h1>Join the demo</h1>
<form action="/browser/thanks" method="post">
  <label>Name <input name="name"></label>
  <button type="submit">Send</button>
</form>
<p><a href="/browser/about">About this page</a></p>
<img src="/browser/logo.svg" alt="hermes-exp logo" width="40" height="40">
<script>console.log("demo form ready")</script>
</body></html>"""
ABOUT = b"<!doctype html><title>About</title><h1>About</h1><p>A page the mock server serves for the browser.</p>"
LOGO = b'<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40"><circle cx="20" cy="20" r="18"/></svg>'


def page(method: str, path: str, body: bytes = b"") -> tuple[int, str, bytes] | None:
    """(status, content type, body) for a path under PREFIX, or None for any other path."""
    if path != PREFIX and not path.startswith(PREFIX + "/"):
        return None
    rest = path[len(PREFIX):].strip("/")
    if method == "POST" and rest == "thanks":
        name = html.escape((parse_qs(body.decode("utf-8", "replace")).get("name") or ["stranger"])[0])
        return 200, "text/html; charset=utf-8", (f"<!doctype html><title>Thanks</title>"
                                                 f"<h1>Thanks, {name}!</h1>").encode()
    if method == "GET":
        found = {"": (FORM, "text/html; charset=utf-8"), "about": (ABOUT, "text/html; charset=utf-8"),
                 "logo.svg": (LOGO, "image/svg+xml")}.get(rest)
        if found:
            return 200, found[1], found[0]
    return 404, "text/html; charset=utf-8", b"<h1>not found</h1>"
