"""Export the ledger to trajectories.jsonl, batch_N.jsonl and statistics.json, atomically.

Each file is written to a temp file and renamed over the old one, so a kill at any moment leaves
the old file or the new one, never a torn line. An unchanged file is not touched."""

from __future__ import annotations

import json
from itertools import groupby
from pathlib import Path
from typing import Any

from hermes_exp.store.atomic import atomic_writer
from hermes_exp.store.formats import write_formats
from hermes_exp.store.ledger import Ledger
from hermes_exp.store.sharegpt import system_mode, trajectory
from hermes_exp.store.stats import StatsBuilder, dumps


def _line(row: dict[str, Any], model: str, system: str) -> str:
    result = json.loads(row["result"])
    return json.dumps(trajectory(row, result, result.get("row", {}), model, system), ensure_ascii=False) + "\n"


EXPORT_VERSION = 2  # bump when the export code changes what it writes


def _stamp(ledger: Ledger, settings: dict[str, Any]) -> str:
    used = [EXPORT_VERSION, settings["model"]["name"], settings["run_name"], settings["distribution"]["name"],
            settings["batch_size"], (settings.get("outputs") or {}).get("formats"), system_mode(settings)]
    return json.dumps([ledger.fingerprint(), ledger.meta("dataset_tasks"), used], default=str)


def export(ledger: Ledger, run_dir: Path, settings: dict[str, Any]) -> dict[str, Any]:
    """Rewrite every output from the ledger; return the statistics. When neither the ledger nor the
    settings the outputs depend on changed since the last export, the files are left as they are."""
    stamp = _stamp(ledger, settings)
    stats_file = run_dir / "statistics.json"
    if ledger.meta("export_stamp") == stamp and stats_file.is_file() and (run_dir / "trajectories.jsonl").is_file():
        return json.loads(stats_file.read_text(encoding="utf-8"))
    statistics = _export(ledger, run_dir, settings)
    ledger.set_meta({"export_stamp": stamp})
    return statistics


def _export(ledger: Ledger, run_dir: Path, settings: dict[str, Any]) -> dict[str, Any]:
    model, system = settings["model"]["name"], system_mode(settings)
    stats = StatsBuilder()
    with atomic_writer(run_dir / "trajectories.jsonl") as out:
        for row in ledger.rows():
            result = json.loads(row["result"]) if row["state"] == "done" and row["result"] else None
            stats.add(row, result)
            if result is not None:
                out.write(_line(row, model, system))
    _write_batches(ledger, run_dir, model, system)
    write_formats(ledger, run_dir, settings)
    known = ledger.meta("dataset_tasks")
    statistics = stats.build(settings, ledger.invocations(), int(known) if known else None)
    with atomic_writer(run_dir / "statistics.json") as out:
        out.write(dumps(statistics))
    return statistics


def _write_batches(ledger: Ledger, run_dir: Path, model: str, system: str) -> None:
    rows = ledger.rows(("done",), order="batch_num, prompt_index, key")
    written: set[str] = set()
    for batch_num, group in groupby(rows, key=lambda r: r["batch_num"]):
        name = f"batch_{batch_num}.jsonl"
        written.add(name)
        with atomic_writer(run_dir / name) as out:
            for row in group:
                out.write(_line(row, model, system))
    for stale in run_dir.glob("batch_*.jsonl"):
        if stale.name not in written:
            stale.unlink()
