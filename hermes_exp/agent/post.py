"""One prepared POST for the model client's hot path: the SDK builds the request (URL, auth and SDK
headers, timeout) once, and each call sends only a new JSON body through the SDK's own httpx client.

The SDK's per-call work (copying and validating options, re-merging headers, re-parsing the URL,
wrapping the response) cost more CPU than the HTTP exchange itself (bench/RESULTS.md); the same
client, transport, connection pool and deadline are used, so the wire is unchanged."""

from __future__ import annotations

from typing import Any

import httpx2

from hermes_exp.agent.encode import encode

# httpx fills these in for every request (the body's length) or the SDK counts them per attempt.
_PER_CALL = {b"content-length"}


def body_bytes(body: dict[str, Any]) -> bytes:
    """`body` as compact JSON, byte for byte what one json.dumps gives (agent/encode.py)."""
    return encode(body)[0]


class PreparedPost:
    """Sends JSON bodies like the template request, through `http`; returns the httpx response."""

    def __init__(self, template: httpx2.Request, http: httpx2.Client) -> None:
        self.url = template.url
        self._headers = httpx2.Headers([(k, v) for k, v in template.headers.raw if k.lower() not in _PER_CALL])
        self._extensions = dict(template.extensions)
        self._http = http
        self._transport = http._transport_for_url(self.url)  # the client's (or its proxy's) transport

    def request(self, content: bytes) -> httpx2.Request:
        """The request of one call, with its body serialised as the SDK serialises it (agent/encode.py)."""
        return httpx2.Request("POST", self.url, headers=self._headers, content=content,
                              extensions=self._extensions)

    def send(self, request: httpx2.Request) -> httpx2.Response:
        """The read response. Raises httpx2's exceptions (the caller maps them to the SDK's), never on
        an HTTP status. Straight through the client's transport: the client adds no auth, hooks or
        cookies to these requests, and its per-request layers for them cost as much CPU as the
        exchange; a redirect is followed by the client itself, as before."""
        response = self._transport.handle_request(request)
        response.request = request
        if response.has_redirect_location:
            response.close()
            return self._http.send(request)
        try:
            response.read()
        except BaseException:
            response.close()
            raise
        return response


def decoded(response: httpx2.Response) -> Any:
    """The answer as the SDK decodes it for `cast_to=object`: JSON when the server says it is JSON,
    else the text (which the caller refuses as not a completion)."""
    content_type = response.headers.get("content-type", "*").split(";")[0]
    return response.json() if content_type.endswith("json") else response.text
