"""One prepared POST for the model client's hot path: the SDK builds the request (URL, auth and SDK
headers, timeout) once, and each call sends only a new JSON body through the SDK's own httpx client.

The SDK's per-call work (copying and validating options, re-merging headers, re-parsing the URL,
wrapping the response) cost more CPU than the HTTP exchange itself (bench/RESULTS.md); the same
client, transport, connection pool and deadline are used, so the wire is unchanged."""

from __future__ import annotations

import json
from typing import Any

import httpx2

from hermes_exp.model.encode import encode
from hermes_exp.model.exchange import StdlibTransport, origin_of
from hermes_exp.model.http11 import Received, RequestError, request_head
from hermes_exp.model.pools import PerThreadTransport

# httpx fills these in for every request (the body's length) or the SDK counts them per attempt.
_PER_CALL = {b"content-length"}


def body_bytes(body: dict[str, Any]) -> bytes:
    """`body` as compact JSON, byte for byte what one json.dumps gives (agent/encode.py)."""
    return encode(body)[0]


class Body:
    """One call's request body, encoded once for its estimate and its first send. The send takes the
    bytes, so a session waiting for its answer holds none of them (late in a task, its whole
    conversation); a retry, or an error's request object, encodes the same request again: the same
    bytes, from the thread's pieces of its messages (agent/encode.py)."""

    __slots__ = ("_request", "_content", "prompt_tokens")

    def __init__(self, request: dict[str, Any]) -> None:
        self._request = request
        self._content: bytes | None
        self._content, self.prompt_tokens = encode(request)

    def take(self) -> bytes:
        content, self._content = self._content, None
        return encode(self._request)[0] if content is None else content


class PreparedPost:
    """Sends JSON bodies like the template request, through `http`; returns the httpx response."""

    def __init__(self, template: httpx2.Request, http: httpx2.Client) -> None:
        self.url = template.url
        self._headers = httpx2.Headers([(k, v) for k, v in template.headers.raw if k.lower() not in _PER_CALL])
        self._extensions = dict(template.extensions)
        self._http = http
        self._transport = http._transport_for_url(self.url)  # the client's (or its proxy's) transport
        self._direct: PerThreadTransport | None = None
        if isinstance(self._transport, PerThreadTransport):  # not through a proxy: the head is built once
            try:
                self._head = request_head(b"POST", self.url.raw_path, self._headers.raw)
            except RequestError:
                return  # a header that would split the request: each call fails on it, as httpx's would
            self._direct = self._transport
            self._origin = origin_of(self.url)
            self._timeouts = self._extensions.get("timeout") or {}

    def request(self, content: bytes) -> httpx2.Request:
        """The request of one call, with its body serialised as the SDK serialises it (agent/encode.py)."""
        return httpx2.Request("POST", self.url, headers=self._headers, content=content,
                              extensions=self._extensions)

    def post(self, body: Body) -> tuple[Any, httpx2.Response | None]:
        """(the decoded answer, None) for a 2xx JSON answer sent as is; otherwise (None, the read
        response, a redirect followed). Raises httpx2's exceptions, never on an HTTP status. The
        request's head was built once; the httpx request and response objects are made only for an
        answer that needs them (an error status, a redirect, a content-encoded body): their body is
        encoded again, the sent bytes were not held while the answer was awaited."""
        if self._direct is None:
            return None, self.send(self.request(body.take()))
        transport = self._direct.own()
        if not isinstance(transport, StdlibTransport):
            return None, self.send(self.request(body.take()))
        received = transport.exchange(self._origin, self._parts(body), self._timeouts)
        if 200 <= received.status < 300 and _plain_json(received):
            return json.loads(received.content), None
        request = self.request(body.take())
        response = httpx2.Response(received.status, headers=received.headers, request=request,
                                   stream=httpx2.ByteStream(received.content),
                                   extensions={"http_version": received.version, "reason_phrase": received.reason})
        return None, self._read(response, request)

    def _parts(self, body: Body) -> list[bytes]:
        """The request's parts for `exchange`, which empties the list once sent: the only reference to the body."""
        content = body.take()
        return [self._head, b"Content-Length: %d\r\n\r\n" % len(content), content]

    def send(self, request: httpx2.Request) -> httpx2.Response:
        """The read response. Raises httpx2's exceptions (the caller maps them to the SDK's), never on
        an HTTP status. Straight through the client's transport: the client adds no auth, hooks or
        cookies to these requests, and its per-request layers for them cost as much CPU as the
        exchange; a redirect is followed from the answer by the client itself (`_read`)."""
        response = self._transport.handle_request(request)
        response.request = request
        return self._read(response, request)

    def _read(self, response: httpx2.Response, request: httpx2.Request) -> httpx2.Response:
        try:
            response.read()
        except BaseException:
            response.close()
            raise
        if not (response.has_redirect_location and self._http.follow_redirects):
            return response
        # Followed from this answer, as the client (like the SDK's default one) follows it: a 307/308
        # repeats the POST at the new location, a 301/302/303 asks it with a GET; the request already
        # sent is not sent again. The rest of the chain is the client's.
        followed = self._http.send(self._http._build_redirect_request(request, response))
        followed.history = [response, *followed.history]
        return followed


def _plain_json(received: Received) -> bool:
    """Whether the body is JSON as sent (no content coding for httpx to undo): what `decoded` would
    give is then json.loads of the bytes."""
    kind = coding = b""
    for name, value in received.headers:
        lower = name.lower()
        if lower == b"content-type":
            kind = kind + b", " + value if kind else value
        elif lower == b"content-encoding":
            coding = coding + b", " + value if coding else value
    return kind.split(b";")[0].strip().endswith(b"json") and coding.strip().lower() in (b"", b"identity")


def decoded(response: httpx2.Response) -> Any:
    """The answer as the SDK decodes it for `cast_to=object`: JSON when the server says it is JSON,
    else the text (which the caller refuses as not a completion)."""
    content_type = response.headers.get("content-type", "*").split(";")[0]
    return response.json() if content_type.endswith("json") else response.text
