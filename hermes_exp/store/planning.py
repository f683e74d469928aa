"""Planning against the ledger in SQLite: the scan's tasks go into a temporary table of the ledger's
connection (temp store: nothing is written to ledger.db), and SQLite joins them with `tasks`, so no
key -> state map of the whole run is built in Python (~0.3 KB per task at 100k). The same rules as
plan.pending / to_reverify / outside, which remain their reference (tests compare the two)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from hermes_exp.dataset.tasks import Slot
from hermes_exp.store.ledger import Ledger

TABLE = "temp.hx_scan"


@contextmanager
def scanned(ledger: Ledger, slots: Iterable[tuple[int, str, int]]) -> Iterator[None]:
    """The scan's slots (in dataset order) as `temp.hx_scan` for the queries below, dropped afterwards."""
    conn = ledger.db.conn
    with ledger.lock:
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
        conn.execute(f"CREATE TABLE {TABLE} (pos INTEGER PRIMARY KEY, idx INTEGER, key TEXT, sample INTEGER)")
        conn.executemany(f"INSERT INTO {TABLE} (idx, key, sample) VALUES (?, ?, ?)",
                         ((slot[0], slot[1], slot[2]) for slot in slots))
        conn.execute("CREATE INDEX temp.hx_scan_key ON hx_scan (key)")
        conn.commit()
    try:
        yield
    finally:
        with ledger.lock:
            conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
            conn.commit()


def reindex(ledger: Ledger) -> None:
    """Keep prompt_index equal to each task's row in the current dataset (only rows that moved are written)."""
    moved = f"SELECT s.idx FROM {TABLE} s WHERE s.key = tasks.key"
    with ledger.lock, ledger.db.conn:
        ledger.db.conn.execute(f"UPDATE tasks SET prompt_index = ({moved}), updated_at = ? "
                               f"WHERE key IN (SELECT s.key FROM {TABLE} s JOIN tasks t ON t.key = s.key "
                               f"WHERE t.prompt_index IS NOT s.idx)", [time.time()])


def outside(ledger: Ledger) -> int:
    """How many of the ledger's tasks the scanned dataset no longer has."""
    return ledger.db.conn.execute(f"SELECT COUNT(*) FROM tasks WHERE key NOT IN (SELECT key FROM {TABLE})").fetchone()[0]


def pending(ledger: Ledger, wanted: dict[str, Any], verifier: str) -> list[Slot]:
    """Every task to run now, in dataset order (plan.pending's rules)."""
    retry = sorted(c for c in wanted["retry"] if c != verifier)
    sql = (f"SELECT s.idx, s.key, s.sample FROM {TABLE} s LEFT JOIN tasks t ON t.key = s.key WHERE ? "
           "OR t.key IS NULL OR t.state IN ('new', 'running') OR (t.state = 'filtered' AND ?) "
           f"OR (t.state = 'error' AND t.error_class IN ({', '.join('?' * len(retry)) or 'NULL'})) ORDER BY s.pos")
    params = [bool(wanted["redo_all"]), bool(wanted["redo_filtered"]), *retry]
    return [Slot(*row) for row in ledger.db.conn.execute(sql, params)]


def to_reverify(ledger: Ledger, verifier: str) -> set[str]:
    """Keys of the scanned tasks whose agent finished but whose verification failed."""
    sql = (f"SELECT s.key FROM {TABLE} s JOIN tasks t ON t.key = s.key "
           "WHERE t.state = 'error' AND t.error_class = ?")
    return {row[0] for row in ledger.db.conn.execute(sql, [verifier])}
