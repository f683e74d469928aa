"""A settled run is not planned again while its ledger and dataset are what the last plan saw: the
verdict of the last plan is kept in the ledger, where any write of a task row (triggers: whoever
writes) deletes it, with the identity of the cached scan it was made from. Real SQLite files, the real CLI against the mock model."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from conftest import run_cli, write_dataset
from test_scan_cache import _age, aged_run

from hermes_exp.run.plan import SETTLED
from hermes_exp.store.ledger import Ledger
from hermes_exp.store.rows import ledger_row
from hermes_exp.worker.result import TaskResult


def _meta(db: Path, key: str) -> str | None:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
    return row[0] if row else None


def test_any_write_of_a_task_row_drops_what_was_derived_and_the_totals_follow(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.db")
    try:
        ledger.set_derived("x", {"n": 1})
        assert ledger.derived("x") == {"n": 1}
        ledger.mark_running("k1", 0, "p")
        assert ledger.derived("x") is None
        row = ledger_row(TaskResult.from_dict({"key": "k1", "index": 0, "row": {"prompt": "p"}, "messages": [], "spent_usd": 0.25,
                          "started_at": 1.0, "finished_at": 2.0, "state": "done"}), [])
        ledger.set_derived("x", 2)
        ledger.record(row, 10)  # an upsert: its update path
        assert ledger.derived("x") is None
        assert ledger.totals()[0] == 1 and ledger.spent_usd() == 0.25
        assert ledger.derived("totals") is None  # a run's start keeps nothing its first write would drop
        ledger.fingerprint()  # the export keeps them
        assert ledger.derived("totals") == [1, row["updated_at"], 0.25]
        with sqlite3.connect(tmp_path / "ledger.db") as other:  # another writer: the triggers still see it
            other.execute("UPDATE tasks SET spent_usd = 1.5 WHERE key = 'k1'")
        assert ledger.derived("totals") is None and ledger.spent_usd() == 1.5
        with sqlite3.connect(tmp_path / "ledger.db") as other:
            other.execute("DELETE FROM tasks")
        assert ledger.totals() == (0, None, 0.0)
        ledger.set_meta({"selection": "abc"})  # other meta rows are not derived from the tasks: kept
        ledger.mark_running("k2", 1, "q")
        assert ledger.meta("selection") == "abc"
    finally:
        ledger.close()


def test_a_settled_run_replans_after_any_change_of_its_ledger_or_dataset(tmp_path: Path, mock_server) -> None:
    rows, data, args = aged_run(tmp_path, mock_server.base_url, "settled")
    db = tmp_path / "outputs" / "settled" / "ledger.db"
    assert run_cli(tmp_path, *args).returncode == 0
    for _ in range(2):  # the first no-op plans and keeps its verdict; the second is served by it
        again = run_cli(tmp_path, *args)
        assert again.returncode == 0 and "nothing to run: all 4 tasks" in again.stderr, again.stderr
        memo = json.loads(_meta(db, f"derived:{SETTLED}"))
        assert memo["tasks"] == 4 and memo["gone"] == 0

    with sqlite3.connect(db) as conn:  # an edit by hand: a provider error is retried by default
        conn.execute("UPDATE tasks SET state = 'error', error_class = 'provider' WHERE prompt_index = 1")
    edited = run_cli(tmp_path, *args)
    assert edited.returncode == 0 and "1 planned now" in edited.stderr, edited.stderr
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM tasks WHERE prompt_index = 2")
    assert "1 planned now" in run_cli(tmp_path, *args).stderr

    write_dataset(data, rows[:3])  # a row removed: said on every invocation, the settled ones included
    _age(data, 30)
    for _ in range(3):
        gone = run_cli(tmp_path, *args)
        assert gone.returncode == 0 and "nothing to run: all 3 tasks" in gone.stderr, gone.stderr
        assert "1 task(s) in the ledger are no longer in the dataset" in gone.stderr
    lines = (tmp_path / "outputs" / "settled" / "trajectories.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["prompt_index"] for line in lines) == [0, 1, 2]


def test_the_config_snapshot_is_rewritten_only_when_it_would_change(tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "Say hello"}])
    args = [f"dataset.path={data}", "run_name=snap", f"model.base_url={mock_server.base_url}",
            "distribution=terminal_only", f"sandbox.root={tmp_path / 'sb'}"]
    snapshot = tmp_path / "outputs" / "snap" / ".hydra"
    assert run_cli(tmp_path, *args).returncode == 0
    written = {name: (snapshot / name).read_bytes() for name in ("config.yaml", "hydra.yaml", "overrides.yaml")}
    assert run_cli(tmp_path, *args).returncode == 0
    assert {name: (snapshot / name).read_bytes() for name in written} == written
    (snapshot / "config.yaml").write_text("edited by hand\n")  # restored: the files are not what was written
    assert run_cli(tmp_path, *args).returncode == 0
    assert (snapshot / "config.yaml").read_bytes() == written["config.yaml"]
    assert run_cli(tmp_path, *args, "num_workers=3").returncode == 0  # another config: another snapshot
    assert b"num_workers: 3" in (snapshot / "config.yaml").read_bytes()
    assert b"num_workers=3" in (snapshot / "overrides.yaml").read_bytes()
