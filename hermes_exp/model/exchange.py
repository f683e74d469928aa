"""The model client's HTTP/1.1 exchange: an httpx transport (mounted in the SDK's own httpx client) that
sends each request over one kept-alive connection, framed and parsed by agent/http11.py.

httpcore and h11 validate and parse every request and response in pure Python, through several
layers of objects per call, and http.client after them still spent most of a call's exchange on
per-header validation and `email.parser` (bench/RESULTS.md). What httpcore did is kept: timeouts per
connect, read and write (from the request, as the SDK sets them), the attempt's total deadline
(agent/deadline.py), TCP_NODELAY, TLS with the client's SSL context, a kept-alive connection closed
when the server said so, when it went quiet past the keep-alive expiry, or when the server closed it;
httpx's exceptions. `exchange` is also called directly with a head built once (agent/post.py)."""

from __future__ import annotations

import select
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any

import httpx2

from hermes_exp.model.http11 import ProtocolError, Received, RequestError, read_response, request_head

Origin = tuple[str, str, int]


def origin_of(url: httpx2.URL) -> Origin:
    scheme = url.scheme
    return scheme, url.host, url.port or (443 if scheme == "https" else 80)


class _Connection:
    """One open connection to one origin."""

    def __init__(self, origin: Origin, sock: socket.socket) -> None:
        self.origin = origin
        self.sock = sock
        self.plain = not isinstance(sock, ssl.SSLSocket)  # then non-blocking, waited for by _send_all, _receive
        self.poll = select.poll()
        self.poll.register(sock, select.POLLIN)
        self.idle_since = time.monotonic()

    def usable(self, origin: Origin, expiry: float | None) -> bool:
        """Same origin, not idle past the expiry, and the server has not closed it (nothing to read)."""
        if origin != self.origin or (expiry is not None and time.monotonic() - self.idle_since > expiry):
            return False
        try:
            return not self.poll.poll(0)
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
        url = request.url
        try:
            head = request_head(request.method.encode("ascii"), url.raw_path, request.headers.raw)
        except RequestError as exc:
            raise httpx2.LocalProtocolError(str(exc), request=request) from exc
        timeouts = request.extensions.get("timeout") or {}
        received = self.exchange(origin_of(url), [head, b"\r\n", request.read()], timeouts, request,
                                 request.method.encode("ascii"))
        return httpx2.Response(received.status, headers=received.headers, stream=httpx2.ByteStream(received.content),
                               extensions={"http_version": received.version, "reason_phrase": received.reason})

    def exchange(self, origin: Origin, parts: list[bytes], timeouts: dict[str, Any],
                 request: httpx2.Request | None = None, method: bytes = b"POST") -> Received:
        """Send the request `parts` (together: head, blank line, body) and read the response. They are
        joined for one write, and the joined copy and the list's items are dropped before the wait for
        the answer (the list is emptied: a caller that holds no other reference holds no body then)."""
        if origin[0] not in ("http", "https"):
            raise httpx2.UnsupportedProtocol(f"request URL has an unsupported protocol '{origin[0]}://'",
                                             request=request)
        conn = self._connection(origin, timeouts.get("connect"), request)
        sock, bound = conn.sock, self._bound
        read_timeout = timeouts.get("read")
        try:
            try:
                write_timeout = bound(timeouts.get("write"), httpx2.WriteTimeout)
                data = b"".join(parts)
                parts.clear()
                if conn.plain:
                    _send_all(sock, data, write_timeout)
                else:
                    sock.settimeout(write_timeout)
                    sock.sendall(data)
                del data
            except (OSError, ssl.SSLError) as exc:  # socket.timeout is an OSError
                raise _network(exc, httpx2.WriteTimeout, httpx2.WriteError, request) from exc
            self._await(conn, read_timeout, request)

            def recv(n: int) -> bytes:
                timeout = bound(read_timeout, httpx2.ReadTimeout)  # raises once the attempt's deadline passed
                if conn.plain:
                    return _receive(conn, n, timeout)
                sock.settimeout(timeout)
                return sock.recv(n)

            try:
                received, extra = read_response(recv, method)
            except (OSError, ssl.SSLError) as exc:
                raise _network(exc, httpx2.ReadTimeout, httpx2.ReadError, request) from exc
            except ProtocolError as exc:
                raise httpx2.RemoteProtocolError(str(exc), request=request) from exc
        except BaseException:
            self._drop()
            raise
        if received.will_close or extra:
            self._drop()
        else:
            conn.idle_since = time.monotonic()
        return received

    def close(self) -> None:
        self._drop()

    def _await(self, conn: _Connection, read_timeout: float | None, request: httpx2.Request | None) -> None:
        """Wait for the answer's first bytes without a receive buffer: a session waiting for its answer
        holds none (a TLS socket may have decrypted bytes waiting already)."""
        if isinstance(conn.sock, ssl.SSLSocket) and conn.sock.pending():
            return
        timeout = self._bound(read_timeout, httpx2.ReadTimeout)
        try:
            ready = conn.poll.poll(None if timeout is None else timeout * 1000)
        except OSError as exc:
            raise _network(exc, httpx2.ReadTimeout, httpx2.ReadError, request) from exc
        if not ready:
            raise httpx2.ReadTimeout("timed out", request=request)

    def _connection(self, origin: Origin, connect_timeout: float | None, request: httpx2.Request | None) -> _Connection:
        if self._conn is not None and self._conn.usable(origin, self._expiry):
            return self._conn
        self._drop()
        try:
            timeout = self._bound(connect_timeout, httpx2.ConnectTimeout)
            sock = socket.create_connection(origin[1:], timeout=timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if origin[0] == "http":
                sock.setblocking(False)  # for good: see _receive
            else:
                sock.settimeout(self._bound(connect_timeout, httpx2.ConnectTimeout))
                sock = self._ssl.wrap_socket(sock, server_hostname=origin[1])
        except (OSError, ssl.SSLError) as exc:
            raise _network(exc, httpx2.ConnectTimeout, httpx2.ConnectError, request) from exc
        self._conn = _Connection(origin, sock)
        return self._conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def _receive(conn: _Connection, n: int, timeout: float | None) -> bytes:
    """sock.recv(n) with `timeout`, on a plain connection's non-blocking socket: the recv first, a poll only
    when nothing has arrived. A socket with a timeout polls before every recv, and settimeout is an ioctl:
    three syscalls per read, each releasing the GIL, where the answer is mostly there once _await saw it
    (with hundreds of session threads every release is a wait for the GIL; bench/RESULTS.md, tenth pass)."""
    while True:
        try:
            return conn.sock.recv(n)
        except BlockingIOError:
            pass
        if not conn.poll.poll(None if timeout is None else timeout * 1000):
            raise socket.timeout("timed out")


def _send_all(sock: socket.socket, data: bytes, timeout: float | None) -> None:
    """sock.sendall(data) with `timeout` for all of it (as sendall's), on a non-blocking socket: a wait for
    room only when the kernel takes nothing."""
    deadline = None if timeout is None else time.monotonic() + timeout
    view = memoryview(data)
    room: select.poll | None = None
    while view:
        try:
            view = view[sock.send(view):]
            continue
        except BlockingIOError:
            pass
        if room is None:
            room = select.poll()
            room.register(sock, select.POLLOUT)
        left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        if not room.poll(None if left is None else left * 1000):
            raise socket.timeout("timed out")


def _network(exc: BaseException, timeout: type[httpx2.TransportError], other: type[httpx2.TransportError],
             request: httpx2.Request | None) -> httpx2.TransportError:
    kind = timeout if isinstance(exc, socket.timeout) else other
    return kind(str(exc) or type(exc).__name__, request=request)
