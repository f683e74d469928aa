"""budget.sweep_max_cost_usd: one budget for every job of a sweep, booked in a file per process in the sweep
dir (no locks, no WAL): real parallel jobs under hydra/launcher=joblib and submitit_local, real processes
booking at once, a real mock server, real ledgers."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import run_cli, write_dataset
from test_budget import PRICED

from hermes_exp.money.budget import Budget
from hermes_exp.money.sweep_book import Book
from hermes_exp.money.sweep_budget import Budgets, SweepBudget, SweepBudgetExhausted


def test_two_jobs_share_one_booking(tmp_path: Path) -> None:
    a, b = SweepBudget(tmp_path, "job-a", 1.0), SweepBudget(tmp_path, "job-b", 1.0)
    a.start(0.0)
    b.start(0.2)  # what job b's ledger says it spent earlier
    first = a.reserve(0.5)
    got: list[float] = []
    waiter = threading.Thread(target=lambda: got.append(b.reserve(0.5)))
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive()  # 0.2 + 0.5 + 0.5 could pass 1.0 while a's call is in flight
    a.settle(first, 0.1)
    waiter.join(5)
    assert got == [0.5] and a.spent() == pytest.approx(0.3)
    b.settle(0.5, 0.4)
    with pytest.raises(SweepBudgetExhausted, match=r"\$0.700000 spent by the sweep's 2 job\(s\) of "
                                                   r"budget.sweep_max_cost_usd=1.0"):
        a.reserve(0.31)
    a.start(0.0)  # a restart keeps the job's booked spend (the larger of file and ledger)
    assert a.spent() == pytest.approx(0.7)


def test_the_run_budget_and_the_sweep_budget_book_together(tmp_path: Path) -> None:
    both = Budgets(Budget(None), SweepBudget(tmp_path, "job", 1.0))
    both.sweep.start(0.0)
    reserved = both.reserve(0.6)
    both.settle(reserved, 0.25)
    assert both.spent == pytest.approx(0.25) and both.sweep.spent() == pytest.approx(0.25)
    assert both.sweep.totals().reserved == 0  # nothing left reserved once the call settled
    capped = Budgets(Budget(0.3), SweepBudget(tmp_path, "job", 1.0))
    with pytest.raises(Exception, match="budget.max_cost_usd=0.3"):
        capped.reserve(0.6)
    assert capped.sweep.spent() == pytest.approx(0.25)


BOOKER = """
import sys, time
from pathlib import Path
from hermes_exp.money.sweep_budget import SweepBudget, SweepBudgetExhausted
book = SweepBudget(Path(sys.argv[1]), sys.argv[2], 1.0)
book.start(0.0)
calls = 0
try:
    while True:
        held = book.reserve(0.1)
        time.sleep(0.01)  # the call in flight
        book.settle(held, 0.1)
        calls += 1
except SweepBudgetExhausted:
    print(calls)
"""


def test_processes_booking_at_once_never_pass_the_limit(tmp_path: Path) -> None:
    """Four real processes that share only the sweep directory (no lock, no database) book 0.1 at a time
    against 1.0: exactly ten calls are made between them, however their bookings interleave."""
    jobs = [subprocess.Popen([sys.executable, "-c", BOOKER, str(tmp_path), f"job-{i}"], stdout=subprocess.PIPE,
                             text=True) for i in range(4)]
    calls = [int(job.communicate(timeout=120)[0]) for job in jobs]
    assert sum(calls) == 10
    booked = Book(tmp_path).totals()
    assert booked.spent == pytest.approx(1.0) and booked.reserved == pytest.approx(0.0) and booked.jobs == 4
    assert sorted(p.name.split(".")[1] for p in (tmp_path / "sweep_budget").iterdir()) == ["g0"] * 4


def test_a_sweep_budget_file_of_an_earlier_version_is_counted(tmp_path: Path) -> None:
    """A sweep started before the book became files: its SQLite file's spend counts (its reservations
    are void), and a job that restarts keeps the larger of its ledger's and that file's figure."""
    with sqlite3.connect(tmp_path / "sweep_budget.db") as old:
        old.execute("PRAGMA journal_mode=WAL")
        old.execute("CREATE TABLE jobs (job TEXT PRIMARY KEY, spent REAL NOT NULL DEFAULT 0, "
                    "reserved REAL NOT NULL DEFAULT 0, updated_at REAL)")
        old.execute("INSERT INTO jobs VALUES (?, 0.6, 0.2, 0)", [str(tmp_path / "model.name=a")])
    other = SweepBudget(tmp_path, "model.name=b", 1.0)
    other.start(0.0)
    assert other.spent() == pytest.approx(0.6)
    with pytest.raises(SweepBudgetExhausted, match=r"\$0.600000 spent by the sweep's 2 job\(s\)"):
        other.reserve(0.5)
    again = SweepBudget(tmp_path, "model.name=a", 1.0)
    again.start(0.1)  # its ledger says less than the old file booked
    assert again.spent() == pytest.approx(0.6) and other.reserve(0.3) == 0.3


def _spent(job: Path) -> float:
    with sqlite3.connect(job / "ledger.db") as db:
        return db.execute("SELECT TOTAL(spent_usd) FROM tasks").fetchone()[0]


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["joblib", "submitit_local"])
def test_parallel_sweep_jobs_stop_at_the_shared_limit(tmp_path: Path, mock_server, launcher: str) -> None:
    """Each job in a process of its own (joblib's loky workers; submitit's local jobs, as on Slurm nodes),
    sharing only the sweep directory."""
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"Shared budget task {i}"} for i in range(12)])
    args = ["-m", f"hydra/launcher={launcher}", "model.name=mock-a,mock-b", f"dataset.path={data}", "run_name=sb",
            f"model.base_url={mock_server.base_url}", "max_turns=4", "filters=none", *PRICED]
    result = run_cli(tmp_path, *args, "budget.sweep_max_cost_usd=12", timeout=300)
    assert result.returncode == 4, result.stderr
    said = result.stderr + "".join(p.read_text() for p in (tmp_path / "outputs" / "sb").glob(".submitit/*/*.err"))
    assert said.count("sweep budget reached: $") >= 2, said  # both jobs say so (submitit's in their logs)
    assert "budget.sweep_max_cost_usd=12" in said and "budget.sweep_max_cost_usd=24" in said
    jobs = sorted(p.parent for p in (tmp_path / "outputs" / "sb").glob("*/ledger.db"))
    assert len(jobs) == 2
    spent = [_spent(j) for j in jobs]
    assert 0 < sum(spent) <= 12  # every call reserved its worst case first: never over the limit
    stats = [json.loads((j / "statistics.json").read_text()) for j in jobs]
    assert all(s["pending"] > 0 for s in stats)
    booked = Book(tmp_path / "outputs" / "sb").totals()
    assert booked.spent == pytest.approx(sum(spent)) and booked.reserved == 0

    raised = run_cli(tmp_path, *args, "budget.sweep_max_cost_usd=100", timeout=300)
    assert raised.returncode == 0, raised.stderr
    assert all(json.loads((j / "statistics.json").read_text())["kept"] == 12 for j in jobs)
