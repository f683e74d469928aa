"""One budget for a whole sweep (`budget.sweep_max_cost_usd`): every job of a `-m` sweep, on whatever host a
launcher runs it, and every worker process of a job, books its calls in the sweep directory's book
(money/sweep_book.py: a file per process, no locks). A call appends its worst case there, then reads every
file again and withdraws if the sweep could pass the limit, so the jobs together never do; a call that finds
no room stops its job like the run's budget."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

from hermes_exp.errors import BudgetExhausted
from hermes_exp.money.sweep_book import Book, Totals, Writer, job_name, job_tag
from hermes_exp.stops import RunStop

WAIT_SECONDS = 120.0  # how long a call waits for calls in flight elsewhere to settle before giving up


class SweepBudgetExhausted(BudgetExhausted):
    """No room left in the sweep's budget: the job stops (exit 4) naming the sweep's spend."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.stop_run = RunStop.SWEEP_BUDGET


class SweepBudget:
    """The sweep's spend as this process books it. Same reserve/settle contract as budget.Budget;
    `reserve` raises SweepBudgetExhausted when the settled spend leaves no room.

    A reservation is appended before it is checked against everything every file says (its own line
    included): of two processes booking at once, the later reader sees both lines, so the reservations
    that stand never pass the limit together (when both withdraw, each tries again after a short wait)."""

    def __init__(self, sweep_dir: Path, job: str, limit: float) -> None:
        self.book = Book(sweep_dir)
        self.path = self.book.folder
        self.job, self.tag, self.limit = job, job_tag(job), limit
        self._lock = threading.Lock()  # one booking at a time per process: its own file stays in order
        self._writer: Writer | None = None
        self._open = 0.0  # what this process holds reserved in its current generation
        self._generation = 0  # the job's newest generation when this process last read the book

    def start(self, job_spent: float) -> None:
        """A job (re)starts: its spend is at least what its ledger says; reservations a crash left are void."""
        with self._lock:
            before = self.book.totals().generations.get(self.tag, -1)
            spent = max(job_spent, self.book.job_spent(self.tag))
            self._generation = before + 1
            self._writer, self._open = Writer(self.book, self.job, self._generation), 0.0
            self._writer.append({"start": spent})

    def reserve(self, worst: float) -> float:
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            with self._lock:
                seen = self._current()
                if seen.spent + worst > self.limit or time.monotonic() > deadline:
                    raise SweepBudgetExhausted(self._exhausted(seen, worst))
                if seen.spent + seen.reserved + worst <= self.limit and self._book(worst):
                    return worst
            time.sleep(0.02 + random.random() * 0.06)  # calls in flight hold the room this one needs

    def settle(self, reserved: float, actual: float) -> None:
        with self._lock:
            self._current()
            released = min(reserved, self._open)  # a reservation of an older generation is void already
            self._open -= released
            self._write({"s": released, "a": actual})

    def spent(self) -> float:
        with self._lock:
            return self.book.totals().spent

    def totals(self) -> Totals:
        """What the book says now: the sweep's spend, what calls in flight hold, and its jobs."""
        with self._lock:
            return self.book.totals()

    def _book(self, worst: float) -> bool:
        """Append the reservation, then keep it only if every file read afterwards leaves room for it."""
        self._write({"r": worst})
        after = self.book.totals()
        if after.spent + after.reserved <= self.limit + 1e-12:
            self._open += worst
            return True
        self._write({"s": worst, "a": 0.0})  # withdrawn: another process booked at the same moment
        return False

    def _current(self) -> Totals:
        """The book now; this process's file moves to the job's newest generation when a start made one."""
        seen = self.book.totals()
        generation = seen.generations.get(self.tag, 0)
        if self._writer is not None and self._writer.generation != generation:
            self._writer, self._open = None, 0.0
        self._generation = generation
        return seen

    def _write(self, record: dict[str, float]) -> None:
        if self._writer is None:
            self._writer = Writer(self.book, self.job, self._generation)
        self._writer.append(record)

    def _exhausted(self, seen: Totals, worst: float) -> str:
        return (f"sweep budget reached: ${seen.spent:.6f} spent by the sweep's {seen.jobs} job(s) of "
                f"budget.sweep_max_cost_usd={self.limit}, and the next call could cost up to ${worst:.6f} "
                f"(booked in {self.path})")


class Budgets:
    """The run's own budget and the sweep's, reserved and settled together (the run's first)."""

    def __init__(self, run: Any, sweep: SweepBudget) -> None:
        self.run, self.sweep = run, sweep

    def __getattr__(self, name: str) -> Any:  # spent, limit, ...: the run's budget answers
        return getattr(self.run, name)

    def reserve(self, worst: float) -> float:
        mine = self.run.reserve(worst)  # 0.0 when the run has no limit of its own
        try:
            self.sweep.reserve(worst)
        except BaseException:
            self.run.settle(mine, 0.0)
            raise
        return worst

    def settle(self, reserved: float, actual: float) -> None:
        self.run.settle(reserved if self.run.limit is not None else 0.0, actual)
        self.sweep.settle(reserved, actual)


def sweep_dir(settings: dict[str, Any]) -> Path:
    """A `-m` job's directory is `<sweep dir>/<its override values>`; a single run is a sweep of one."""
    run_dir = Path(settings["run_dir"]).resolve()
    return run_dir if run_dir.name == settings["run_name"] else run_dir.parent


def shared(settings: dict[str, Any]) -> SweepBudget | None:
    limit = (settings.get("budget") or {}).get("sweep_max_cost_usd")
    if limit is None:
        return None
    where = sweep_dir(settings)
    return SweepBudget(where, job_name(Path(settings["run_dir"]).resolve(), where), float(limit))


def for_settings(settings: dict[str, Any], run_budget: Any) -> Any:
    """The budget a process's model client books calls against: the sweep's too when one is set."""
    sweep = shared(settings)
    return run_budget if sweep is None else Budgets(run_budget, sweep)
