"""Planning joined in SQLite (store/planning.py) says exactly what plan.pending / to_reverify / outside
and Ledger.reindex say over Python maps, for every state and error class, every resume intent, rows
moved, added and removed; and it writes nothing to the ledger file but the rows that moved."""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path

import pytest

from hermes_exp.dataset.tasks import Slot
from hermes_exp.run.plan import ERROR_CLASSES, VERIFIER, outside, pending, to_reverify
from hermes_exp.store import planning
from hermes_exp.store.ledger import Ledger

STATES = [("done", None), ("filtered", None), ("running", None), ("new", None)] + [("error", c) for c in ERROR_CLASSES]


def _ledger(path: Path) -> Ledger:
    """One task per state and error class, at row i (twice over: two samples), and a few the scan lacks."""
    ledger = Ledger(path)
    with ledger.db.conn:
        for i, (state, error_class) in enumerate(STATES * 2):
            ledger.db.conn.execute("INSERT INTO tasks (key, prompt_index, prompt, state, error_class, attempts, sample) "
                                   "VALUES (?, ?, 'p', ?, ?, 1, 0)", [f"k{i}", i, state, error_class])
    return ledger


def _scan() -> list[Slot]:
    """Most of the ledger's tasks, some at other rows, in another order, and new ones."""
    known = [Slot(i if i % 3 else i + 100, f"k{i}", i % 2) for i in range(len(STATES) * 2 - 3)]
    return [*reversed(known), Slot(500, "n1", 0), Slot(501, "n2", 1)]


WANTED = [{"retry": set(retry), "redo_filtered": redo_filtered, "redo_all": redo_all}
          for retry in ([], ["provider", "sandbox"], list(ERROR_CLASSES), ["verifier", "model"])
          for redo_filtered, redo_all in itertools.product([False, True], repeat=2)]


@pytest.mark.parametrize("wanted", WANTED)
def test_the_plan_is_the_one_python_maps_give(tmp_path: Path, wanted) -> None:
    ledger = _ledger(tmp_path / "ledger.db")
    try:
        indexed = _scan()
        states = ledger.states()
        with planning.scanned(ledger, indexed):
            assert planning.pending(ledger, wanted, VERIFIER) == pending(indexed, states, wanted)
            assert planning.to_reverify(ledger, VERIFIER) == {s.key for s in to_reverify(indexed, states)}
            assert planning.outside(ledger) == outside(indexed, states) == 3
    finally:
        ledger.close()


def test_rows_that_moved_are_reindexed_as_before_and_nothing_else_is_written(tmp_path: Path) -> None:
    sql, python = _ledger(tmp_path / "a.db"), _ledger(tmp_path / "b.db")
    try:
        python.reindex(_scan())
        with sqlite3.connect(tmp_path / "a.db") as conn:
            before = dict(conn.execute("SELECT key, updated_at FROM tasks"))
        with planning.scanned(sql, _scan()):
            planning.reindex(sql)
        query = "SELECT key, prompt_index FROM tasks ORDER BY key"
        assert list(sql.db.execute(query)) == list(python.db.execute(query))
        after = dict(sql.db.execute("SELECT key, updated_at FROM tasks"))
        moved = {s.key for s in _scan() if s.key.startswith("k") and s.index != int(s.key[1:])}
        assert moved and {k for k in after if after[k] != before[k]} == moved
        assert sql.db.execute("SELECT name FROM sqlite_temp_master WHERE name = 'hx_scan'").fetchone() is None
    finally:
        sql.close()
        python.close()
