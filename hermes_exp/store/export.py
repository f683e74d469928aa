"""Export the ledger to trajectories.jsonl, batch_N.jsonl and statistics.json, atomically.

Each file is written to a temp file and renamed over the old one, so a kill at any moment leaves
the old file or the new one, never a torn line. An unchanged file is not touched."""

from __future__ import annotations

import filecmp
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import groupby
from pathlib import Path
from typing import IO, Any

from hermes_exp.store.ledger import Ledger
from hermes_exp.store.sharegpt import trajectory
from hermes_exp.store.stats import StatsBuilder, dumps


@contextmanager
def atomic_writer(path: Path) -> Iterator[IO[str]]:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide outputs from the rest of a team
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists() and filecmp.cmp(tmp, path, shallow=False):
            os.unlink(tmp)
        else:
            os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _line(row: dict[str, Any], model: str) -> str:
    result = json.loads(row["result"])
    return json.dumps(trajectory(row, result, result.get("row", {}), model), ensure_ascii=False) + "\n"


def export(ledger: Ledger, run_dir: Path, settings: dict[str, Any]) -> dict[str, Any]:
    """Rewrite every output from the ledger; return the statistics."""
    model = settings["model"]["name"]
    stats = StatsBuilder()
    with atomic_writer(run_dir / "trajectories.jsonl") as out:
        for row in ledger.rows():
            result = json.loads(row["result"]) if row["state"] == "done" and row["result"] else None
            stats.add(row, result)
            if result is not None:
                out.write(_line(row, model))
    _write_batches(ledger, run_dir, model)
    statistics = stats.build(settings, ledger.invocations())
    with atomic_writer(run_dir / "statistics.json") as out:
        out.write(dumps(statistics))
    return statistics


def _write_batches(ledger: Ledger, run_dir: Path, model: str) -> None:
    rows = ledger.rows(("done",), order="batch_num, prompt_index, key")
    written: set[str] = set()
    for batch_num, group in groupby(rows, key=lambda r: r["batch_num"]):
        name = f"batch_{batch_num}.jsonl"
        written.add(name)
        with atomic_writer(run_dir / name) as out:
            for row in group:
                out.write(_line(row, model))
    for stale in run_dir.glob("batch_*.jsonl"):
        if stale.name not in written:
            stale.unlink()
