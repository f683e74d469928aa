"""Progress on stderr: one redrawn line on a terminal, periodic plain lines otherwise."""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import TextIO


class Progress:
    def __init__(self, total: int, already: int = 0, stream: TextIO | None = None, every: float = 10.0) -> None:
        self.total = total
        self.already = already
        self.counts: Counter[str] = Counter()
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every = 0.2 if self.tty else every
        self.started = time.monotonic()
        self._last = 0.0

    def update(self, state: str) -> None:
        self.counts[state] += 1
        now = time.monotonic()
        if now - self._last >= self.every or sum(self.counts.values()) == self.total:
            self._last = now
            self._draw()

    def line(self) -> str:
        n = sum(self.counts.values())
        elapsed = time.monotonic() - self.started
        rate = n / elapsed if elapsed > 0 else 0.0
        eta = (self.total - n) / rate if rate > 0 else 0.0
        width = 24
        filled = int(width * n / self.total) if self.total else width
        bar = "#" * filled + "-" * (width - filled)
        return (f"[{bar}] {n}/{self.total}  done {self.counts['done']}  filtered {self.counts['filtered']}  "
                f"failed {self.counts['error']}  {rate:.1f}/s  eta {eta:.0f}s")

    def _draw(self) -> None:
        if self.tty:
            self.stream.write("\r" + self.line())
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
