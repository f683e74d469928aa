"""One HTTP/1.1 request and its response over an open socket, framed and parsed in a few byte
operations: the model client's exchange (agent/exchange.py).

http.client validated each header through a regular expression and `putheader` call, and parsed the
response head through `email.parser`: most of the CPU of a model call's exchange (bench/RESULTS.md).
What they checked is kept: header names and values and the request target are refused when they
could split the request (CR, LF, NUL, a space in the target), 1xx interim responses are skipped, a
head is at most 64 KiB and 100 header lines, and the body is framed by `Transfer-Encoding: chunked`,
`Content-Length` or the end of the connection, as RFC 9112 says. The body is returned as sent
(still content-encoded): httpx decodes it."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

MAX_HEAD = 65536  # bytes of a response head (http.client's line limit)
MAX_HEADERS = 100  # header lines of a response (http.client's limit)
_RECV = 65536
_NO_BODY = (204, 304)
_ILLEGAL_NAME = re.compile(rb"[^!#$%&'*+\-.^_`|~0-9A-Za-z]")  # anything but an RFC 9110 token
_ILLEGAL_VALUE = re.compile(rb"[\x00\r\n]")
_ILLEGAL_TARGET = re.compile(rb"[\x00-\x20\x7f]")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")


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


class _Buffer:
    """What was received and not yet consumed, refilled by `recv()` (b"" at the end of the stream)."""

    __slots__ = ("data", "pos", "recv")

    def __init__(self, recv: Callable[[int], bytes]) -> None:
        self.data = b""
        self.pos = 0
        self.recv = recv

    def more(self) -> bool:
        chunk = self.recv(_RECV)
        if not chunk:
            return False
        self.data = self.data[self.pos:] + chunk if self.pos < len(self.data) else chunk
        self.pos = 0
        return True

    def until(self, mark: bytes, limit: int, what: str) -> bytes:
        """Bytes up to `mark` (consumed with it)."""
        while True:
            end = self.data.find(mark, self.pos)
            if end >= 0:
                piece = self.data[self.pos:end]
                self.pos = end + len(mark)
                return piece
            if len(self.data) - self.pos > limit:
                raise ProtocolError(f"the response's {what} is longer than {limit} bytes")
            if not self.more():
                raise ProtocolError(f"the server closed the connection in the middle of the response's {what}")

    def exactly(self, n: int) -> bytes:
        while len(self.data) - self.pos < n:
            if not self.more():
                raise ProtocolError(f"the server closed the connection {n - len(self.data) + self.pos} "
                                    "bytes before the end of the response's body")
        piece = self.data[self.pos:self.pos + n]
        self.pos += n
        return piece

    def rest(self) -> bytes:
        pieces = [self.data[self.pos:]]
        while chunk := self.recv(_RECV):
            pieces.append(chunk)
        self.data, self.pos = b"", 0
        return b"".join(pieces)

    def left(self) -> int:
        return len(self.data) - self.pos


def read_response(recv: Callable[[int], bytes], method: bytes = b"POST") -> tuple[Received, bool]:
    """The next final response read through `recv`, and whether bytes beyond it were received (the
    connection cannot be reused then). Raises ProtocolError."""
    buffer = _Buffer(recv)
    if not buffer.more():
        raise ProtocolError("Server disconnected without sending a response.")
    while True:
        version, status, reason, headers = _head(buffer)
        if not 100 <= status < 200 or status == 101:
            break  # 1xx are interim: the final response follows
    fields = {}
    for name, value in headers:
        key = name.lower()
        fields[key] = fields[key] + b"," + value if key in fields else value
    tokens = fields.get(b"connection", b"").lower()
    close = b"close" in tokens if version == b"HTTP/1.1" else b"keep-alive" not in tokens
    if method == b"HEAD" or status in _NO_BODY or 100 <= status < 200:
        content = b""
    elif b"chunked" in fields.get(b"transfer-encoding", b"").lower():
        content = _chunked(buffer)
    elif b"content-length" in fields:
        content = buffer.exactly(_length(fields[b"content-length"]))
    else:
        content, close = buffer.rest(), True
    return Received(status, reason, version, headers, content, close), buffer.left() > 0


def _head(buffer: _Buffer) -> tuple[bytes, int, bytes, list[tuple[bytes, bytes]]]:
    raw = buffer.until(b"\r\n\r\n", MAX_HEAD, "head")
    lines = raw.split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    code, _, reason = rest.partition(b" ")
    if version not in (b"HTTP/1.1", b"HTTP/1.0") or len(code) != 3 or not code.isdigit():
        raise ProtocolError(f"the status line {lines[0][:100]!r} is not HTTP/1.x's")
    if len(lines) > MAX_HEADERS + 1:
        raise ProtocolError(f"the response has more than {MAX_HEADERS} header lines")
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t") and headers:  # an obsolete folded line continues the last value
            name, value = headers[-1]
            headers[-1] = (name, value + b" " + line.strip(b" \t"))
            continue
        name, colon, value = line.partition(b":")
        if not colon or not name or _ILLEGAL_NAME.search(name):
            raise ProtocolError(f"the header line {line[:100]!r} is not `name: value`")
        headers.append((name, value.strip(b" \t")))
    return version, int(code), reason, headers


def _length(value: bytes) -> int:
    values = {v.strip() for v in value.split(b",")}  # repeated, they must agree (RFC 9110 8.6)
    if len(values) != 1 or not next(iter(values)).isdigit():
        raise ProtocolError(f"invalid Content-Length {value[:100]!r}")
    return int(values.pop())


def _chunked(buffer: _Buffer) -> bytes:
    pieces = []
    while True:
        line = buffer.until(b"\r\n", 1024, "chunk size")
        size = line.split(b";", 1)[0].strip(b" \t")
        if not _HEX.fullmatch(size):
            raise ProtocolError(f"invalid chunk size {line[:100]!r}")
        n = int(size, 16)
        if n == 0:
            while buffer.until(b"\r\n", MAX_HEAD, "trailer"):
                pass  # trailer fields, until the blank line
            return b"".join(pieces)
        pieces.append(buffer.exactly(n))
        if buffer.exactly(2) != b"\r\n":
            raise ProtocolError("a chunk is not followed by CRLF")
