"""A total deadline for one HTTP attempt. The HTTP client's timeouts are per read, so a server that
trickles its answer a byte at a time keeps a call alive for ever; here every connect, read and write
of the attempt's thread gets at most the time left before the attempt's deadline."""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore2
import httpx2


from hermes_exp.model.exchange import StdlibTransport
from hermes_exp.model.pools import PerThreadTransport

_local = threading.local()  # the sync client does all I/O of a request in the caller's thread


@contextmanager
def attempt_deadline(seconds: float) -> Iterator[None]:
    """Every network operation of this thread inside the block ends by `seconds` from now."""
    previous = getattr(_local, "deadline", None)
    _local.deadline = time.monotonic() + seconds
    try:
        yield
    finally:
        _local.deadline = previous


def _bounded(timeout: float | None, exc: type[Exception]) -> float | None:
    deadline = getattr(_local, "deadline", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise exc("the attempt's total deadline (model.timeout) passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore2.NetworkStream):
    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _bounded(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _bounded(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore2.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname,
                                                     _bounded(timeout, httpcore2.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore2.NetworkBackend):
    def __init__(self, inner: httpcore2.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore2.NetworkStream:
        return _DeadlineStream(self._inner.connect_tcp(host, port, _bounded(timeout, httpcore2.ConnectTimeout),
                                                       local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore2.NetworkStream:
        return _DeadlineStream(self._inner.connect_unix_socket(
            path, _bounded(timeout, httpcore2.ConnectTimeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _with_deadline(transport: httpx2.HTTPTransport) -> httpx2.HTTPTransport:
    pool = transport._pool  # the connection pool (or proxy pool) the transport sends through
    if not isinstance(getattr(pool, "_network_backend", None), httpcore2.NetworkBackend):
        raise RuntimeError(f"httpcore2 {httpcore2.__version__} changed its pool: the model call deadline "
                           "cannot be enforced; pin the httpcore2 version hermes-exp was tested with")
    pool._network_backend = _DeadlineBackend(pool._network_backend)
    return transport


class DeadlineHTTPClient(httpx2.Client):
    """An httpx client whose transports (direct and through proxies) honour `attempt_deadline`."""

    def _init_transport(self, verify: Any = True, cert: Any = None, trust_env: bool = True,
                        **kwargs: Any) -> httpx2.BaseTransport:
        transport = kwargs.pop("transport", None)
        if transport is not None:
            return transport
        # one TLS context (loading the CA store is costly) for the connection of each session thread
        # (agent/pools.py), each sent with http.client (agent/exchange.py)
        context = httpx2.create_ssl_context(verify=verify, cert=cert, trust_env=trust_env)
        expiry = kwargs.get("limits", httpx2.Limits()).keepalive_expiry
        return PerThreadTransport(lambda: StdlibTransport(context, expiry, _bounded))

    def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> httpx2.BaseTransport:
        transport = super()._init_proxy_transport(*args, **kwargs)
        return _with_deadline(transport) if isinstance(transport, httpx2.HTTPTransport) else transport


# the SDK's own default client's pool size (openai._constants), which a custom client must restate
MAX_CONNECTIONS, MAX_KEEPALIVE = 1000, 100


def deadline_http_client(timeout: float, sessions: int = 0) -> httpx2.Client:
    """The model client's HTTP client: the SDK's defaults plus `attempt_deadline`, with a connection
    kept alive for each of the process's `sessions`: with fewer, every call beyond the pool's keep-alive
    size opens and closes a TCP connection (at 256 sessions most of the runner's CPU per call)."""
    limits = httpx2.Limits(max_connections=max(MAX_CONNECTIONS, sessions),
                           max_keepalive_connections=max(MAX_KEEPALIVE, sessions))
    return DeadlineHTTPClient(timeout=httpx2.Timeout(timeout, connect=min(timeout, 5.0)), limits=limits,
                              follow_redirects=True)
