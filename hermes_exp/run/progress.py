"""Live progress on stderr: a rich bar redrawn in place on a terminal, periodic plain lines otherwise.

While the live bar is up, console log handlers are routed through rich's console, so a worker's
log line is printed above the bar instead of being torn by the next redraw."""

from __future__ import annotations

import bisect
import logging
import math
import sys
import time
from collections import Counter, deque
from typing import TextIO

from rich.console import Console, Group
from rich.file_proxy import FileProxy
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

RECENT_SECONDS = 60.0  # "recent" 429s: the ones in this window


def _human(n: float) -> str:
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n:.0f}"


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s" if rest >= 60 else f"{rest}s"


class Progress:
    """Counts finished tasks by state, plus tokens, cost, concurrency and 429s when the caller knows them.

    `update` is called once per finished task; `note` (optional) adds usage as it becomes known."""

    def __init__(self, total: int, already: int = 0, stream: TextIO | None = None, every: float = 10.0,
                 label: str = "hermes-exp", spent_before: float = 0.0) -> None:
        self.label = label  # the run (or sweep job) the bar is about
        self.spent_before = spent_before  # what earlier invocations spent: part of the projected total
        self._task_costs: list[float] = []  # what each task of this invocation cost (sorted, for the p90)
        self.total = total
        self.already = already
        self.counts: Counter[str] = Counter()
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every = every
        self.started = time.monotonic()
        self.tokens = 0
        self.cost = 0.0
        self.concurrency: int | None = None
        self.rate_limited = 0
        self._recent_429s: deque[float] = deque()
        self._last: float | None = None  # None: the first finished task prints at once in a log
        self.scored = self.passed = self.suspect = 0  # verified samples of this invocation (suspect: verifier_suspect)
        self._live: Live | None = None
        self._proxied: list[tuple[logging.StreamHandler, TextIO]] = []
        if self.tty and total:
            self._start_live()

    # -- what the runner reports ---------------------------------------------------------------
    def update(self, state: str) -> None:
        """One task finished in `state` ("done", "filtered" or "error")."""
        self.counts[state] += 1
        if not self.tty:
            now = time.monotonic()
            if self._last is None or now - self._last >= self.every or self.finished == self.total:
                self._last = now
                self.stream.write(self.line() + "\n")
                self.stream.flush()

    def note(self, tokens: int = 0, cost: float = 0.0, concurrency: int | None = None, rate_limited: int = 0) -> None:
        """Add tokens, cost (USD) and 429 responses seen; set the current concurrency."""
        self.tokens += tokens
        self.cost += cost
        if concurrency is not None:
            self.concurrency = concurrency
        if rate_limited:
            self.rate_limited += rate_limited
            self._recent_429s.extend([time.monotonic()] * rate_limited)

    def task_cost(self, usd: float) -> None:
        """What one finished task cost (every attempt), for the projected total."""
        bisect.insort(self._task_costs, float(usd or 0.0))

    def projection(self) -> tuple[float, float] | None:
        """(projected total cost, the same at each remaining task's p90 cost) of the run, from the
        tasks finished so far; None before the first task or when nothing costs anything."""
        costs = self._task_costs
        if not costs or not costs[-1]:
            return None
        left = max(0, self.total - self.finished)
        done = self.spent_before + sum(costs)
        p90 = costs[min(len(costs) - 1, max(0, math.ceil(0.9 * len(costs)) - 1))]
        return done + left * sum(costs) / len(costs), done + left * p90

    def verdict(self, score: dict | None) -> None:
        """A finished sample's verification (None: not verified): counted in the `passed` piece."""
        if score and score.get("reward") is not None:
            self.scored += 1
            self.passed += bool(score.get("passed"))
            self.suspect += bool(score.get("suspect"))

    def close(self) -> None:
        """Stop redrawing (the last bar stays on screen) and give the log handlers back their streams."""
        if self._live is not None:
            self._live.stop()
            self._live = None
            for handler, stream in self._proxied:
                handler.setStream(stream)
            self._proxied.clear()

    # -- what is shown -------------------------------------------------------------------------
    @property
    def finished(self) -> int:
        return sum(self.counts.values())

    def in_flight(self) -> int:
        """Tasks running now, as far as the parent can tell: bounded by the concurrency and what is left."""
        left = self.total - self.finished
        return min(self.concurrency, left) if self.concurrency is not None else 0

    def recent_429s(self) -> int:
        horizon = time.monotonic() - RECENT_SECONDS
        while self._recent_429s and self._recent_429s[0] < horizon:
            self._recent_429s.popleft()
        return len(self._recent_429s)

    def eta(self) -> tuple[float, float]:
        """(tasks per second, seconds left) from this invocation's pace."""
        elapsed = time.monotonic() - self.started
        rate = self.finished / elapsed if elapsed > 0 else 0.0
        return rate, ((self.total - self.finished) / rate if rate > 0 else 0.0)

    def _pace(self) -> str:
        rate, eta = self.eta()
        if self.finished < self.total:
            finish = time.strftime("%H:%M", time.localtime(time.time() + eta)) if rate > 0 else "?"
            return f"{rate:.1f}/s  eta {_duration(eta)} (~{finish})"
        return f"took {_duration(time.monotonic() - self.started)}"

    def _details(self) -> list[tuple[str, str]]:
        """(text, rich style) pieces after the bar: states, usage, concurrency, resume note."""
        pieces = [(f"done {self.counts['done']}", "green"), (f"filtered {self.counts['filtered']}", "yellow"),
                  (f"failed {self.counts['error']}", "red" if self.counts["error"] else "")]
        if self.scored:
            pieces.append((f"passed {self.passed}/{self.scored} ({100 * self.passed / self.scored:.0f}%)", "green"))
        if self.suspect:  # zeros that look like the environment's, not the agent's
            pieces.append((f"suspect {self.suspect}", "magenta"))
        if self.concurrency is not None:
            pieces.append((f"running {self.in_flight()}", "cyan"))
        if self.tokens or self.cost:
            pieces.append((f"{_human(self.tokens)} tokens" + (f"  ${self.cost:.4f}" if self.cost else ""), ""))
        projected = self.projection()
        if projected is not None:
            pieces.append((f"projected ${projected[0]:.4f} (p90 ${projected[1]:.4f})", "bold"))
        if self.concurrency is not None:
            pieces.append((f"concurrency {self.concurrency}", ""))
        if self.concurrency is not None or self.rate_limited:
            recent = self.recent_429s()
            pieces.append((f"429s {recent} in last {RECENT_SECONDS:.0f}s", "magenta" if recent else ""))
        if self.already:
            pieces.append((f"{self.already} finished earlier", "dim"))
        return pieces

    def line(self) -> str:
        width = 24
        filled = int(width * self.finished / self.total) if self.total else width
        details = "  ".join(text for text, _ in self._details())
        bar = f"[{'#' * filled}{'-' * (width - filled)}] {self.finished}/{self.total}  {details}  {self._pace()}"
        return f"{self.label} {bar}"

    def __rich__(self) -> Group:
        bar = ProgressBar(total=max(self.total, 1), completed=self.finished, width=30,
                          complete_style="yellow" if self.counts["error"] else "green", finished_style="green")
        grid = Table.grid(padding=(0, 1))
        grid.add_row(Text(self.label, style="bold"), bar, Text(f"{self.finished}/{self.total}  {self._pace()}"))
        details = Text(" " * (len(self.label) + 1))
        for i, (text, style) in enumerate(self._details()):
            details.append(("  " if i else "") + text, style=style)
        return Group(grid, details)

    # -- terminal handling ---------------------------------------------------------------------
    def _start_live(self) -> None:
        console = Console(file=self.stream)
        self._live = Live(self, console=console, refresh_per_second=4, transient=False,
                          redirect_stdout=True, redirect_stderr=True)
        self._live.start()
        for handler in _console_handlers():
            self._proxied.append((handler, handler.stream))
            handler.setStream(FileProxy(console, handler.stream))


def _console_handlers() -> list[logging.StreamHandler]:
    """Stream handlers writing to a terminal, on the root logger and every configured logger."""
    loggers = [logging.getLogger()] + [lg for lg in logging.root.manager.loggerDict.values()
                                       if isinstance(lg, logging.Logger)]
    found: list[logging.StreamHandler] = []
    for logger in loggers:
        for handler in logger.handlers:
            if (isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)
                    and handler not in found
                    and getattr(handler.stream, "isatty", lambda: False)()):
                found.append(handler)
    return found
