"""The ledger's `scores` table: one verification per (task key, verifier identity), beside the task's
raw result (never inside it), so a new verifier re-scores offline and never re-runs an agent.
Workdir archives for `command` re-verification live in `<run_dir>/archives/`, written here."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from hermes_exp.store.atomic import atomic_writer
from hermes_exp.store.ledger import FINAL_STATES, Ledger

ARCHIVE_DIR = "archives"


def save_score(ledger: Ledger, key: str, score: dict[str, Any]) -> None:
    usage = score.get("usage") or []
    row = {"key": key, "verifier": score["verifier"], "kind": score.get("kind"), "reward": score.get("reward"),
           "passed": None if score.get("passed") is None else int(bool(score["passed"])),
           "details": score.get("details") or "", "seconds": score.get("seconds"), "error": score.get("error"),
           "api_calls": len(usage), "cost_usd": sum(u.get("cost_usd") or 0.0 for u in usage),
           "usage": json.dumps(usage), "scored_at": time.time(), "suspect": score.get("suspect")}
    with ledger.lock, ledger.db.conn:
        ledger.db["scores"].upsert(row, pk=("key", "verifier"), alter=False)


def set_outcome(ledger: Ledger, key: str, state: str, reason: str | None = None, error_class: str | None = None,
                error: str | None = None, batch_size: int = 10) -> None:
    """A task's state after (re-)verification: done / filtered (given a batch slot if it has none yet),
    or error class `verifier`."""
    with ledger.lock:
        row = ledger.db.execute("SELECT batch_num FROM tasks WHERE key = ?", [key]).fetchone()
        batch = row[0] if row else None
        if batch is None and state in FINAL_STATES:
            batch = ledger.next_batch(batch_size)
        with ledger.db.conn:
            ledger.db.execute("UPDATE tasks SET state = ?, reason = ?, error_class = ?, error = ?, batch_num = ?, "
                              "updated_at = ? WHERE key = ?",
                              [state, reason, error_class, error, batch, time.time(), key])


def archive_path(run_dir: Path, key: str) -> Path:
    return run_dir / ARCHIVE_DIR / f"{key.split(':')[-1]}.tar.gz"


def output_path(run_dir: Path, key: str) -> Path:
    return run_dir / ARCHIVE_DIR / f"{key.split(':')[-1]}.verifier.txt"


def save_output(run_dir: Path, key: str, score: dict[str, Any]) -> None:
    """A verify command's whole output beside the sample's archive (the ledger keeps what explains the
    score); the latest verification's."""
    if score.get("output"):
        path = output_path(run_dir, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_writer(path) as fh:
            fh.write(score["output"])


def save_archive(ledger: Ledger, run_dir: Path, key: str, packed: bytes) -> str:
    """Write a task's workdir archive atomically; record its path (relative to the run dir)."""
    path = archive_path(run_dir, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_writer(path, binary=True) as fh:
        fh.write(packed)
    rel = str(path.relative_to(run_dir))
    with ledger.lock, ledger.db.conn:
        ledger.db.execute("UPDATE tasks SET archive = ?, archive_bytes = ? WHERE key = ?", [rel, len(packed), key])
    return rel
