"""The model client's HTTP/1.1 exchange: an httpx transport (mounted in the SDK's own httpx client) that
sends each request over one kept-alive connection with the standard library's `http.client`.

httpcore and h11 validate and parse every request and response in pure Python, through several
layers of objects per call: most of the runner's CPU per model call (bench/RESULTS.md). `http.client`
does the same exchange for about half of it. What httpcore did is kept: timeouts per connect, read
and write (from the request, as the SDK sets them), the attempt's total deadline (agent/deadline.py),
TCP_NODELAY, TLS with the client's SSL context, a kept-alive connection closed when the server said
so, when it went quiet past the keep-alive expiry, or when the server closed it; httpx's exceptions."""

from __future__ import annotations

import http.client
import io
import select
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx2

_VERSIONS = {10: b"HTTP/1.0", 11: b"HTTP/1.1"}
_T = TypeVar("_T")
_READ_BUFFER = 8192  # held by each session thread while it waits for its answer


class _Io:
    """The connection's socket as http.client sees it: every write and read bounded by its own
    timeout and by the attempt's deadline (`bound(timeout, exception)`)."""

    def __init__(self, sock: socket.socket, bound: Callable[..., float | None]) -> None:
        self.sock = sock
        self.bound = bound
        self.read_timeout: float | None = None
        self.write_timeout: float | None = None
        self._out: list[bytes] = []

    def sendall(self, data: bytes) -> None:
        self._out.append(data)  # http.client writes head and body apart: `flush` sends them together

    def flush(self) -> None:
        data, self._out = b"".join(self._out), []
        self.sock.settimeout(self.bound(self.write_timeout, httpx2.WriteTimeout))
        self.sock.sendall(data)

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(_Reader(self), _READ_BUFFER)

    def close(self) -> None:
        """http.client "closes" a connection the server will close before the body is read: the
        transport closes the socket itself once the response is read."""


class _Reader(io.RawIOBase):
    def __init__(self, owner: _Io) -> None:
        self._owner = owner

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        owner = self._owner
        owner.sock.settimeout(owner.bound(owner.read_timeout, httpx2.ReadTimeout))
        return owner.sock.recv_into(buffer)


class _Connection:
    """One open connection to one origin."""

    def __init__(self, origin: tuple[str, str, int], sock: socket.socket, bound: Callable[..., float | None]) -> None:
        self.origin = origin
        self.sock = sock
        self.io = _Io(sock, bound)
        self.http = http.client.HTTPConnection(origin[1], origin[2])
        self.http.sock = self.io
        self.idle_since = time.monotonic()

    def usable(self, origin: tuple[str, str, int], expiry: float | None) -> bool:
        """Same origin, not idle past the expiry, and the server has not closed it (nothing to read)."""
        if origin != self.origin or (expiry is not None and time.monotonic() - self.idle_since > expiry):
            return False
        poll = select.poll()
        poll.register(self.sock, select.POLLIN)
        try:
            return not poll.poll(0)
        except OSError:
            return False

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class StdlibTransport(httpx2.BaseTransport):
    """Sends requests one at a time over one kept-alive connection (agent/pools.py gives each session
    thread its own). Raises httpx's exceptions, never for an HTTP status."""

    def __init__(self, ssl_context: ssl.SSLContext, keepalive_expiry: float | None,
                 bound: Callable[..., float | None]) -> None:
        self._ssl = ssl_context
        self._expiry = keepalive_expiry
        self._bound = bound
        self._conn: _Connection | None = None

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        timeouts = request.extensions.get("timeout") or {}
        conn = self._connection(request, timeouts.get("connect"))
        conn.io.read_timeout, conn.io.write_timeout = timeouts.get("read"), timeouts.get("write")
        try:
            response = self._exchange(conn.http, request)
            content = _received(response.read, request)
        except BaseException:
            self._drop()
            raise
        if response.will_close or conn.http.sock is None:
            self._drop()
        else:
            conn.idle_since = time.monotonic()
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.msg.raw_items()]
        return httpx2.Response(response.status, headers=headers, stream=httpx2.ByteStream(content),
                               extensions={"http_version": _VERSIONS.get(response.version, b"HTTP/1.1"),
                                           "reason_phrase": response.reason.encode("latin-1", "replace")})

    def close(self) -> None:
        self._drop()

    def _exchange(self, conn: http.client.HTTPConnection, request: httpx2.Request) -> http.client.HTTPResponse:
        body = request.read()
        try:
            conn.putrequest(request.method, request.url.raw_path.decode("ascii"), skip_host=True,
                            skip_accept_encoding=True)
            for key, value in request.headers.raw:
                conn.putheader(key, value)
            conn.endheaders(body or None)
            conn.sock.flush()
        except (socket.timeout, ssl.SSLError, OSError) as exc:
            raise _network(exc, httpx2.WriteTimeout, httpx2.WriteError, request) from exc
        except (http.client.HTTPException, ValueError) as exc:
            raise httpx2.LocalProtocolError(str(exc), request=request) from exc
        return _received(conn.getresponse, request)

    def _connection(self, request: httpx2.Request, connect_timeout: float | None) -> _Connection:
        url = request.url
        scheme = url.scheme
        if scheme not in ("http", "https"):
            raise httpx2.UnsupportedProtocol(f"request URL has an unsupported protocol '{scheme}://'",
                                             request=request)
        origin = (scheme, url.host, url.port or (443 if scheme == "https" else 80))
        if self._conn is not None and self._conn.usable(origin, self._expiry):
            return self._conn
        self._drop()
        try:
            timeout = self._bound(connect_timeout, httpx2.ConnectTimeout)
            sock = socket.create_connection(origin[1:], timeout=timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if scheme == "https":
                sock.settimeout(self._bound(connect_timeout, httpx2.ConnectTimeout))
                sock = self._ssl.wrap_socket(sock, server_hostname=origin[1])
        except (socket.timeout, ssl.SSLError, OSError) as exc:
            raise _network(exc, httpx2.ConnectTimeout, httpx2.ConnectError, request) from exc
        self._conn = _Connection(origin, sock, self._bound)
        return self._conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def _received(read: Callable[[], _T], request: httpx2.Request) -> _T:
    """`read()` (the response's head, or its body) with a socket or protocol failure as httpx's."""
    try:
        return read()
    except (socket.timeout, ssl.SSLError, OSError) as exc:
        raise _network(exc, httpx2.ReadTimeout, httpx2.ReadError, request) from exc
    except http.client.HTTPException as exc:
        raise httpx2.RemoteProtocolError(_protocol(exc), request=request) from exc


def _network(exc: BaseException, timeout: type[httpx2.TransportError], other: type[httpx2.TransportError],
             request: httpx2.Request) -> httpx2.TransportError:
    kind = timeout if isinstance(exc, socket.timeout) else other
    return kind(str(exc) or type(exc).__name__, request=request)


def _protocol(exc: http.client.HTTPException) -> str:
    if isinstance(exc, http.client.RemoteDisconnected):
        return "Server disconnected without sending a response."
    return f"{type(exc).__name__}: {exc}"
