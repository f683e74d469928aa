"""How a model call is sent (the only module that imports `openai`): the openai SDK's own aiohttp client (`openai.DefaultAioHttpClient`) on one
event loop per process, run by a daemon thread and shared by every client of the process (the agent's,
the judge's, vision's, compression's) and so by all its session threads. A session thread submits its
call to the loop and waits on the call's future; the loop holds one connection pool per client.

Everything on the wire is the libraries': request building, auth and SDK headers (openai), redirects
(the SDK's httpx2 client: 307/308 repeat the POST, 301/302/303 become a GET, at most its max_redirects),
cookies the provider sets, proxies and TLS settings from the environment, kept-alive connections per
origin (aiohttp). What is ours: the attempt's total deadline (the HTTP timeouts are per read, so a
server trickling its answer would outlast them) and closing the clients at exit."""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
import weakref
from typing import Any

import aiohttp
import httpx  # noqa: F401 - see below
import openai

from hermes_exp.model.retry import Failure, retry_after

# openai 3.x looks for the legacy `httpx` in sys.modules on every request, from the loop's thread: a
# session thread importing it meanwhile (the web tools do, lazily) lets the SDK see a half-initialised
# module and fail the call with an AttributeError. Imported whole here, before any call is sent.

# The SDK's own per-read timeout; a longer model.timeout lengthens it (a slow model may think past it
# before its first byte), a shorter one is enforced over the whole attempt by `Transport.post`.
_SDK_READ_TIMEOUT = 600.0
_EXIT_WAIT = 2.0  # seconds the exit waits for the clients' connections to close

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_pid: int | None = None
_loop_thread: threading.Thread | None = None
_open: set[openai.AsyncOpenAI] = set()  # clients whose connection pools are still open
_closing: set[asyncio.Task[None]] = set()  # held until done: the loop keeps only weak references to tasks


class AttemptFailed(Exception):
    """One attempt that got no answer to use: an error status, a failed exchange, no whole answer within
    the timeout. `failure` says what, in one line, with the status and the wait the server asked for."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class Transport:
    """POSTs JSON bodies to one endpoint path for a client: the answer's bytes, or the SDK's exception."""

    def __init__(self, base_url: str, api_key: str, headers: dict[str, str] | None, timeout: float,
                 path: str = "/chat/completions") -> None:
        self.timeout = timeout
        self._path = path
        self._loop = event_loop()
        extra = {"timeout": timeout} if timeout > _SDK_READ_TIMEOUT else {}
        # max_retries=0: the caller retries (its policy, the rate limiter, the budget see every attempt)
        self.client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url, max_retries=0,
                                         http_client=openai.DefaultAioHttpClient(),
                                         default_headers=headers or None, **extra)
        with _lock:
            _open.add(self.client)
        weakref.finalize(self, _close_soon, self._loop, self.client)

    def post(self, content: bytes) -> bytes:
        """The 2xx answer's body. Raises AttemptFailed for anything else."""
        if threading.current_thread() is _loop_thread:
            raise RuntimeError("a model call cannot wait for its answer on the event loop it is sent from")
        future = asyncio.run_coroutine_threadsafe(self._post(content), self._loop)
        del content  # the request holds the body until it is answered; this frame need not
        try:
            return future.result()
        except openai.APIStatusError as exc:
            raise AttemptFailed(Failure(_describe(exc), exc.status_code, retry_after(exc.response.headers))) from None
        except openai.APIConnectionError as exc:  # includes the SDK's own timeouts
            raise AttemptFailed(Failure(_describe(exc))) from None
        except TimeoutError:
            raise AttemptFailed(Failure(f"APITimeoutError: no whole answer within model.timeout ({self.timeout:g} s)")) \
                from None
        except AttemptFailed:
            raise
        except BaseException:
            future.cancel()  # the waiting thread was interrupted: the call is dropped with it
            raise
        finally:
            del future  # it holds the exception raised, whose traceback holds this frame: no cycle

    async def _post(self, content: bytes) -> bytes:
        try:
            async with asyncio.timeout(self.timeout):  # the whole attempt: connect, send, every read
                return await self.client.post(self._path, cast_to=bytes, content=content)
        except aiohttp.ClientError as exc:  # what the SDK's aiohttp adapter does not map to its own errors
            raise _failed(f"APIConnectionError: {type(exc).__name__}: {getattr(exc, 'message', None) or exc}") from None
        except ValueError as exc:  # aiohttp refuses a header that would split the request; nothing was sent
            raise _failed(f"APIConnectionError: the request was not sent: {exc}") from None


def _failed(message: str) -> AttemptFailed:
    return AttemptFailed(Failure(_one_line(message)))


def _describe(exc: openai.APIError) -> str:
    """The SDK's error in one line: its class, the HTTP status, its message, and what a failed connection
    failed on (refused, reset, a TLS certificate, ...)."""
    status = getattr(exc, "status_code", None)
    kind, message = type(exc).__name__, exc.message or str(exc)
    if status:
        return _one_line(f"{kind} (HTTP {status}): {message}")
    cause = exc.__cause__
    if cause is not None and str(cause):
        return _one_line(f"{kind}: {message} ({type(cause).__name__}: {cause})")
    return _one_line(f"{kind}: {message}")


def _one_line(text: str) -> str:
    """The libraries' messages may span lines (aiohttp quotes the bytes it could not parse): one line."""
    return " ".join(text.split())


def event_loop() -> asyncio.AbstractEventLoop:
    """This process's loop for model calls, started on first use (again in a forked child, whose copy
    of the parent's loop has no thread running it)."""
    global _loop, _loop_pid, _loop_thread
    with _lock:
        if _loop is None or _loop_pid != os.getpid():
            _open.clear()  # a forked child's copies of the parent's clients belong to the parent's loop
            _loop, _loop_pid = asyncio.new_event_loop(), os.getpid()
            _loop_thread = threading.Thread(target=_loop.run_forever, name="model-calls", daemon=True)
            _loop_thread.start()
            atexit.register(_close_all, _loop)
        return _loop


def _close_soon(loop: asyncio.AbstractEventLoop, client: openai.AsyncOpenAI) -> None:
    """Close a client nobody holds any more, without waiting (it may be collected on any thread)."""
    if not loop.is_closed():
        loop.call_soon_threadsafe(_start_closing, client)


def _start_closing(client: openai.AsyncOpenAI) -> None:
    task = asyncio.get_running_loop().create_task(_close(client))
    _closing.add(task)
    task.add_done_callback(_closing.discard)


async def _close(client: openai.AsyncOpenAI) -> None:
    with _lock:
        if client not in _open:
            return
        _open.discard(client)
    await client.close()


def _close_all(loop: asyncio.AbstractEventLoop) -> None:
    """At exit: close every open client's connections (aiohttp warns of unclosed sessions otherwise),
    then stop the loop."""
    if loop.is_closed() or os.getpid() != _loop_pid:
        return
    with _lock:
        clients = list(_open)

    async def close_all() -> Any:
        return await asyncio.gather(*(_close(c) for c in clients), return_exceptions=True)

    try:
        asyncio.run_coroutine_threadsafe(close_all(), loop).result(_EXIT_WAIT)
    except Exception:  # noqa: BLE001 - a pool that will not close in time must not hold up the exit
        pass
    loop.call_soon_threadsafe(loop.stop)
