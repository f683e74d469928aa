"""SIGINT and SIGTERM stop a run once: the first raises KeyboardInterrupt (no new tasks; finished work is
committed, sandboxes closed), every later one only hurries that shutdown along. A second Ctrl-C must not
cut the cleanup short, leave sandboxes behind, or make it look as if nothing ran."""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    def __init__(self) -> None:
        self.hurry = threading.Event()  # set by a signal that came once the run was already stopping
        self._stopping = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "StopSignals":
        try:
            self._previous = {s: signal.signal(s, self._handle) for s in SIGNALS}
        except ValueError:  # not the main thread: signals cannot be handled here at all
            self._previous = {}
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stopping:  # a late second signal must not kill the process while it reports and exits
            return
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def shield(self) -> None:
        """From now on (the run is cleaning up), a signal never raises."""
        self._stopping = True

    def _handle(self, signum: int, frame: Any) -> None:
        if not self._stopping:
            self._stopping = True
            raise KeyboardInterrupt()
        if not self.hurry.is_set():
            self.hurry.set()
            print("\nalready stopping: closing the sandboxes and saving finished tasks, then exiting",
                  file=sys.stderr)
