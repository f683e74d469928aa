"""One HTTP/1.1 request and its response over an open socket: the model client's exchange
(agent/exchange.py).

http.client validated each header through a regular expression and `putheader` call, and parsed the
response head through `email.parser`: most of the CPU of a model call's exchange (bench/RESULTS.md).
Here the request head is built once per client (header names and values and the target are refused
when they could split the request: CR, LF, NUL, a space in the target), and the response is parsed by
httptools, the binding of llhttp (Node's HTTP parser, also uvicorn's): strict RFC 9112 framing
(`Transfer-Encoding: chunked`, `Content-Length`, or the end of the connection), 1xx interim responses
skipped, a head of at most 64 KiB and 100 header lines. The body is returned as sent (still
content-encoded): httpx decodes it."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

import httptools

MAX_HEAD = 65536  # bytes of a response head (http.client's line limit)
MAX_HEADERS = 100  # header lines of a response (http.client's limit)
_RECV = 65536
_ILLEGAL_NAME = re.compile(rb"[^!#$%&'*+\-.^_`|~0-9A-Za-z]")  # anything but an RFC 9110 token
_ILLEGAL_VALUE = re.compile(rb"[\x00\r\n]")
_ILLEGAL_TARGET = re.compile(rb"[\x00-\x20\x7f]")


class ProtocolError(Exception):
    """The server's bytes are not an HTTP/1.1 response (the caller raises httpx's RemoteProtocolError)."""


class RequestError(ValueError):
    """A request that cannot be sent as it is: it would be read as another request (httpx's LocalProtocolError)."""


class Received(NamedTuple):
    status: int
    reason: bytes
    version: bytes  # b"HTTP/1.1" or b"HTTP/1.0"
    headers: list[tuple[bytes, bytes]]  # as received, in order
    content: bytes  # the body as sent (content-encoded), without chunked framing
    will_close: bool  # the server closes the connection after this response


def request_head(method: bytes, target: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
    """The request line and header lines, without the blank line that ends them. Raises RequestError
    for a target or header that could split the request."""
    if _ILLEGAL_TARGET.search(target) or _ILLEGAL_TARGET.search(method) or not target:
        raise RequestError(f"the request target {target!r} contains a space or a control character")
    lines = [method + b" " + target + b" HTTP/1.1"]
    for name, value in headers:
        if not name or _ILLEGAL_NAME.search(name):
            raise RequestError(f"invalid header name {name!r}")
        if _ILLEGAL_VALUE.search(value):
            raise RequestError(f"invalid value for header {name!r}: it contains CR, LF or NUL")
        lines.append(name + b": " + value.strip(b" \t"))
    return b"\r\n".join(lines) + b"\r\n"


class _Message:
    """httptools' callbacks for the response being read: status, headers and body pieces. A 1xx interim
    response is forgotten when the next message begins."""

    __slots__ = ("reason", "headers", "body", "begun", "headers_done", "done", "after", "status", "parser",
                 "keep_alive", "version")

    def __init__(self) -> None:
        self.begun = 0  # messages begun: one more after the final one means bytes beyond it
        self.done = self.after = self.headers_done = False
        self.reason, self.headers, self.body = b"", [], []
        self.status = 0
        self.parser: Any = None
        self.keep_alive, self.version = False, "1.1"

    def on_message_begin(self) -> None:
        self.begun += 1
        if self.done:
            self.after = True
        else:
            self.reason, self.headers, self.body, self.headers_done = b"", [], [], False

    def on_status(self, status: bytes) -> None:
        self.reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.headers_done:
            return  # a trailer field of a chunked body: not one of the response's headers
        if len(self.headers) >= MAX_HEADERS:
            raise ProtocolError(f"the response has more than {MAX_HEADERS} header lines")
        self.headers.append((name, value.strip(b" \t")))

    def on_headers_complete(self) -> None:
        self.headers_done = True
        self.keep_alive, self.version = self.parser.should_keep_alive(), self.parser.get_http_version()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.done = not 100 <= self.status < 200 or self.status == 101  # 1xx are interim; 101 is final


def read_response(recv: Callable[[int], bytes], method: bytes = b"POST") -> tuple[Received, bool]:
    """The next final response read through `recv`, and whether bytes beyond it were received (the
    connection cannot be reused then). Raises ProtocolError. The bytes are parsed by httptools
    (llhttp, Node's HTTP parser): status line, headers, `Content-Length` (repeated values must agree),
    chunked framing and trailers as RFC 9112 says; a body without either ends with the connection."""
    message = _Message()
    parser = message.parser = httptools.HttpResponseParser(message)
    head = 0
    while not message.done:
        chunk = recv(_RECV)
        if not chunk:
            return _ended(message, parser, head), False
        if not message.headers_done:
            head += len(chunk)
        try:
            parser.feed_data(chunk)
        except httptools.HttpParserError as exc:
            if message.done:  # the final response is whole: what follows it is not reused
                return _received(message, parser, message.status), True
            if isinstance(exc.__cause__ or exc.__context__, ProtocolError):  # raised by a callback
                raise (exc.__cause__ or exc.__context__) from None
            raise ProtocolError(f"the server's answer is not HTTP/1.x: {exc}") from exc
        if not message.headers_done and head > MAX_HEAD:
            raise ProtocolError(f"the response's head is longer than {MAX_HEAD} bytes")
        if method == b"HEAD" and message.headers_done and not message.done:
            status = parser.get_status_code()
            return _received(message, parser, status, close=True), False  # its length says nothing of a body
    return _received(message, parser, message.status), message.after


def _ended(message: _Message, parser: Any, head: int) -> Received:
    """The server closed the connection: the end of a body without length, else a torn response."""
    if not message.begun:
        raise ProtocolError("Server disconnected without sending a response.")
    if not message.headers_done:
        raise ProtocolError("the server closed the connection in the middle of the response's head")
    fields = {name.lower() for name, _ in message.headers}
    if b"content-length" in fields or b"transfer-encoding" in fields:
        raise ProtocolError("the server closed the connection before the end of the response's body")
    return _received(message, parser, parser.get_status_code(), close=True)


def _received(message: _Message, parser: Any, status: int, close: bool = False) -> Received:
    return Received(status, message.reason, b"HTTP/" + message.version.encode(), message.headers,
                    b"".join(message.body), close or not message.keep_alive)
