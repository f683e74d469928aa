"""A cap on how fast a factory starts sandboxes (`sandbox.max_starts_per_second`): a burst of container
creates and starts, one per session at a run's start, queues in the engine and slows every start;
spacing them keeps each one quick. 0 (or less) means no cap."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from hermes_exp.errors import ConfigError


class StartRate:
    """`wait()` returns when the next start may begin: starts are at least 1/rate seconds apart."""

    def __init__(self, per_second: float = 0.0, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if isinstance(per_second, bool) or not isinstance(per_second, (int, float)) or per_second < 0:
            raise ConfigError(f"sandbox.max_starts_per_second must be a number >= 0, got {per_second!r}",
                              "set sandbox.max_starts_per_second=<n> (0 = no cap), e.g. 10")
        self.interval = 1.0 / per_second if per_second > 0 else 0.0
        self._clock, self._sleep = clock, sleep
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> float:
        """Book the next slot and sleep until it (outside the lock); returns the seconds slept."""
        if not self.interval:
            return 0.0
        with self._lock:
            now = self._clock()
            slot = max(now, self._next)
            self._next = slot + self.interval
        delay = slot - now
        if delay > 0:
            self._sleep(delay)
        return delay
