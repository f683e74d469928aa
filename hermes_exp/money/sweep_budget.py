"""One budget for a whole sweep (`budget.sweep_max_cost_usd`): every job of a `-m` sweep, in whatever
process a launcher runs it, and every worker process of a job, books its calls in one small SQLite file
in the sweep directory. A call reserves its worst case there first (in one IMMEDIATE transaction), so
the jobs together never pass the limit; a call that finds no room stops its job like the run's budget."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from hermes_exp.errors import BudgetExhausted
from hermes_exp.stops import RunStop

FILE = "sweep_budget.db"
WAIT_SECONDS = 120.0  # how long a call waits for calls in flight elsewhere to settle before giving up


class SweepBudgetExhausted(BudgetExhausted):
    """No room left in the sweep's budget: the job stops (exit 4) naming the sweep's spend."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.stop_run = RunStop.SWEEP_BUDGET


class SweepBudget:
    """The sweep's spend as this process books it. Same reserve/settle contract as budget.Budget;
    `reserve` raises SweepBudgetExhausted when the settled spend leaves no room."""

    def __init__(self, sweep_dir: Path, job: str, limit: float) -> None:
        self.path = Path(sweep_dir) / FILE
        self.job = job
        self.limit = limit
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One connection for the process's threads; the lock keeps their transactions apart.
        self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        self._lock = threading.Lock()
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS jobs (job TEXT PRIMARY KEY, spent REAL NOT NULL DEFAULT 0, "
                         "reserved REAL NOT NULL DEFAULT 0, updated_at REAL)")

    def start(self, job_spent: float) -> None:
        """A job (re)starts: its spend is at least what its ledger says; reservations a crash left are void."""
        with self._transaction() as db:
            db.execute("INSERT INTO jobs (job, spent, reserved, updated_at) VALUES (?, ?, 0, ?) "
                       "ON CONFLICT(job) DO UPDATE SET spent = MAX(spent, excluded.spent), reserved = 0, "
                       "updated_at = excluded.updated_at", [self.job, job_spent, time.time()])

    def reserve(self, worst: float) -> float:
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            with self._transaction() as db:
                spent, reserved, jobs = self._totals(db)
                if spent + worst > self.limit or time.monotonic() > deadline:
                    raise SweepBudgetExhausted(
                        f"sweep budget reached: ${spent:.6f} spent by the sweep's {jobs} job(s) of "
                        f"budget.sweep_max_cost_usd={self.limit}, and the next call could cost up to ${worst:.6f} "
                        f"(booked in {self.path})")
                if spent + reserved + worst <= self.limit:
                    db.execute("UPDATE jobs SET reserved = reserved + ?, updated_at = ? WHERE job = ?",
                               [worst, time.time(), self.job])
                    return worst
            time.sleep(0.05)  # calls in flight hold the room this one needs: they may cost less

    def settle(self, reserved: float, actual: float) -> None:
        with self._transaction() as db:
            db.execute("UPDATE jobs SET reserved = MAX(0, reserved - ?), spent = spent + ?, updated_at = ? "
                       "WHERE job = ?", [reserved, actual, time.time(), self.job])

    def spent(self) -> float:
        with self._lock:
            return self._totals(self._db)[0]

    @staticmethod
    def _totals(db: sqlite3.Connection) -> tuple[float, float, int]:
        row = db.execute("SELECT TOTAL(spent), TOTAL(reserved), COUNT(*) FROM jobs").fetchone()
        return float(row[0]), float(row[1]), int(row[2])

    def _transaction(self) -> Any:
        return _Immediate(self._db, self._lock)


class _Immediate:
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error): one writer at a time across processes, and
    one transaction at a time on the process's connection."""

    def __init__(self, db: sqlite3.Connection, lock: threading.Lock) -> None:
        self.db, self.lock = db, lock

    def __enter__(self) -> sqlite3.Connection:
        self.lock.acquire()
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except BaseException:
            self.lock.release()
            raise
        return self.db

    def __exit__(self, kind: Any, *_: Any) -> None:
        try:
            self.db.execute("ROLLBACK" if kind else "COMMIT")
        finally:
            self.lock.release()


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
    return SweepBudget(sweep_dir(settings), str(Path(settings["run_dir"]).resolve()), float(limit))


def for_settings(settings: dict[str, Any], run_budget: Any) -> Any:
    """The budget a process's model client books calls against: the sweep's too when one is set."""
    sweep = shared(settings)
    return run_budget if sweep is None else Budgets(run_budget, sweep)
