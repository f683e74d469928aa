"""A connection pool per session thread under the model client's one httpx client.

httpcore's pool rescans all of its connections (probing each idle socket) twice per request under one
lock, so with a shared pool every model call costs O(sessions): at 1024 sessions most of the runner's
CPU per call. A sync session thread has one request in flight at a time, so a pool of its own holds
one kept-alive connection; the wire, the client's limits, timeouts and deadline are unchanged."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

import httpx2


class _Slot:
    """A thread's transport; when the thread ends (its thread-local goes), its connection is closed."""

    def __init__(self, transport: httpx2.BaseTransport) -> None:
        self.transport = transport


class PerThreadTransport(httpx2.BaseTransport):
    """Sends each request through the calling thread's own transport, made by `make` on first use."""

    def __init__(self, make: Callable[[], httpx2.BaseTransport]) -> None:
        self._make = make
        self._local = threading.local()
        self._lock = threading.Lock()
        self._closers: list[weakref.finalize] = []

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        return self.own().handle_request(request)

    def own(self) -> httpx2.BaseTransport:
        """The calling thread's transport."""
        slot = getattr(self._local, "slot", None)
        if slot is None:
            slot = self._local.slot = _Slot(self._make())
            with self._lock:
                self._closers = [c for c in self._closers if c.alive]
                self._closers.append(weakref.finalize(slot, slot.transport.close))
        return slot.transport

    def close(self) -> None:
        with self._lock:
            closers, self._closers = self._closers, []
        for close in closers:
            close()
