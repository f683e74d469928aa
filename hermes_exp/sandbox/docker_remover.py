"""Removing closed task containers in the background (`sandbox.remove_in_background`): a task's close()
queues its container and returns, so the session and its slot are free at once while a few remover
threads do the engine's work. The factory's shutdown drains the queue (the run's end, Ctrl-C, an error),
then reaps whatever is left; a failed removal is logged and counted; after a kill -9 the next run's
reaper removes what was queued (the containers' labels name the dead process)."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

log = logging.getLogger(__name__)

THREADS = 2  # removals in flight at once: the engine is the bottleneck, more only queue inside it
IDLE = 5.0  # seconds a remover thread waits for work before it ends
DRAIN_WAIT = 120.0  # seconds shutdown waits for the queue before the reap takes over


class Remover:
    """`remove(cid) -> bool` (False: it failed, and said why) runs on remover threads. At most
    `backlog` containers wait or are being removed; past that, `submit` waits for room, so a slow
    engine cannot pile up closed containers without bound (live + queued <= 2 x max_sandboxes)."""

    def __init__(self, remove: Callable[[str], bool], backlog: int = 32, threads: int = THREADS) -> None:
        self._remove, self._backlog, self._max_threads = remove, max(1, backlog), max(1, threads)
        self._queue: deque[tuple[str, Callable[[], object]]] = deque()
        self._cond = threading.Condition()
        self._busy = self._threads = 0
        self.removed = 0
        self.failed: list[str] = []  # removals that failed (logged each); the shutdown reap retries them

    def submit(self, cid: str, then: Callable[[], object] = lambda: None) -> None:
        """Queue `cid` for removal; `then` runs once it is done (whatever the outcome)."""
        with self._cond:
            while self.pending() >= self._backlog:
                self._cond.wait()
            self._queue.append((cid, then))
            if self._threads < min(self._max_threads, len(self._queue) + self._busy):
                self._threads += 1
                threading.Thread(target=self._work, name="hx-docker-remover", daemon=True).start()
            self._cond.notify_all()

    def pending(self) -> int:
        """Containers queued or being removed."""
        with self._cond:
            return len(self._queue) + self._busy

    def _work(self) -> None:
        while True:
            with self._cond:
                if not self._queue:
                    self._cond.wait(IDLE)
                if not self._queue:
                    self._threads -= 1
                    return
                cid, then = self._queue.popleft()
                self._busy += 1
            ok = self._remove_one(cid, then)
            with self._cond:
                self._busy -= 1
                if ok:
                    self.removed += 1
                else:
                    self.failed.append(cid)
                self._cond.notify_all()

    def _remove_one(self, cid: str, then: Callable[[], object]) -> bool:
        try:
            return bool(self._remove(cid))
        except Exception:  # a bug in removal must not end the remover: log it, the reap retries
            log.exception("docker sandbox: removing container %s failed", cid[:12])
            return False
        finally:
            try:
                then()
            except Exception:
                log.exception("docker sandbox: cleanup after removing container %s failed", cid[:12])

    def drain(self, timeout: float = DRAIN_WAIT) -> int:
        """Wait (at most `timeout` s) until nothing is queued or being removed; returns how many are
        still pending (0 when drained). Failed removals are reported once, then forgotten."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.pending() and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())
            failed, self.failed = self.failed, []
            left = self.pending()
        if failed:
            log.warning("docker sandbox: %d container(s) could not be removed after their task (%s); "
                        "removing them again at shutdown", len(failed), ", ".join(c[:12] for c in failed[:5]))
        if left:
            log.warning("docker sandbox: %d container removal(s) still queued after %gs; the shutdown reap "
                        "removes them", left, timeout)
        return left
