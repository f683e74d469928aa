"""The warm pool (`sandbox.warm_pool`): containers of the run's default image created and started ahead,
so a task's open does not wait for the engine. A pooled container has run nothing but its keeper; each
is handed to exactly one task and removed with it, never reused. What is left in the pool is removed at
shutdown (the run's end, Ctrl-C); after a kill -9 the next run's reaper removes them (same labels)."""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

from hermes_exp.errors import SandboxError

log = logging.getLogger(__name__)

POOL_KEY = "pool"  # the task label of a pooled container: it is made before its task is known
STOP_WAIT = 30.0  # seconds shutdown waits for a container being created to come back
MAX_FAILURES = 3  # starts failing in a row before the pool gives up (the tasks then start their own)


class WarmPool:
    """`size` started containers kept ready by one filler thread. `take()` never waits: an empty pool
    returns None and the caller starts its own container, so the pool can only take time off an open."""

    def __init__(self, size: int, make: Callable[[], str], remove: Callable[[str], object],
                 pace: Callable[[], object] = lambda: None) -> None:
        self.size = size
        self._make, self._remove, self._pace = make, remove, pace
        self._ready: deque[str] = deque()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None
        self.made = self.taken = 0

    def start(self) -> None:
        """Begin filling (once; a no-op for size 0 or after stop)."""
        with self._cond:
            if self.size and self._thread is None and not self._stopped:
                self._thread = threading.Thread(target=self._fill, name="hx-docker-pool", daemon=True)
                self._thread.start()

    def take(self) -> str | None:
        with self._cond:
            if not self._ready:
                return None
            self.taken += 1
            cid = self._ready.popleft()
            self._cond.notify_all()  # room for one more
            return cid

    def ready(self) -> int:
        with self._cond:
            return len(self._ready)

    def _fill(self) -> None:
        failures = 0
        while self._room():
            self._pace()  # sandbox.max_starts_per_second counts the pool's starts too
            try:
                cid = None if self._stopped else self._make()
            except SandboxError as exc:  # the tasks start their own containers and report the error
                if self._stopped:
                    return
                failures += 1
                log.warning("docker warm pool: %s", exc)
                if failures >= MAX_FAILURES:
                    log.warning("docker warm pool: stopped after %d failures in a row", failures)
                    return
                with self._cond:
                    self._cond.wait(2.0 ** failures)  # a stop wakes it
                continue
            failures = 0
            if cid is not None and not self._keep(cid):
                self._remove(cid)  # made while the pool was stopping

    def _room(self) -> bool:
        """Wait until the pool is short of a container; False once stopped."""
        with self._cond:
            while not self._stopped and len(self._ready) >= self.size:
                self._cond.wait()
            return not self._stopped

    def _keep(self, cid: str) -> bool:
        with self._cond:
            if self._stopped:
                return False
            self._ready.append(cid)
            self.made += 1
            return True

    def stop(self) -> None:
        """Stop filling and remove what is ready; waits (bounded) for a container being made."""
        with self._cond:
            self._stopped = True
            ready, self._ready = list(self._ready), deque()
            self._cond.notify_all()
            thread = self._thread
        for cid in ready:
            self._remove(cid)
        if thread is not None and thread is not threading.current_thread():
            thread.join(STOP_WAIT)
