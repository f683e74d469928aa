"""Export the ledger to trajectories.jsonl, batch_N.jsonl and statistics.json, atomically.

Each file is written to a temp file and renamed over the old one, so a kill at any moment leaves
the old file or the new one, never a torn line. An unchanged file is not touched."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hermes_exp.errors import LedgerError
from hermes_exp.store.atomic import atomic_writer
from hermes_exp.store.batches import BatchPlaces
from hermes_exp.store.formats import write_formats
from hermes_exp.store.ledger import Ledger
from hermes_exp.store.sharegpt import system_mode, trajectory
from hermes_exp.store.stats import StatsBuilder, dumps
from hermes_exp.store.samples import Selection
from hermes_exp.tools.registry import Registry


def _line(row: dict[str, Any], model: str, system: str, registry: Registry, result: dict[str, Any],
          score: dict[str, Any] | None) -> str:
    line = trajectory(row, result, result.get("row", {}), model, system, registry, score)
    return json.dumps(line, ensure_ascii=False) + "\n"


EXPORT_VERSION = 2  # bump when the export code changes what it writes
SPLITS = ("passed.jsonl", "failed.jsonl")


def _stamp(ledger: Ledger, settings: dict[str, Any]) -> str:
    outputs = settings.get("outputs") or {}
    used = [EXPORT_VERSION, settings["model"]["name"], settings["run_name"], settings["distribution"]["name"],
            settings["batch_size"], outputs.get("formats"), system_mode(settings), settings.get("verifier"),
            settings.get("samples_per_prompt", 1), settings.get("selection"), outputs.get("splits")]
    scores = ledger.db.execute("SELECT COUNT(*), MAX(scored_at) FROM scores").fetchone()
    return json.dumps([ledger.fingerprint(), ledger.meta("dataset_tasks"), list(scores), used], default=str)


def export(ledger: Ledger, run_dir: Path, settings: dict[str, Any]) -> dict[str, Any]:
    """Rewrite every output from the ledger; return the statistics. When neither the ledger nor the
    settings the outputs depend on changed since the last export, the files are left as they are."""
    stamp = _stamp(ledger, settings)
    stats_file = run_dir / "statistics.json"
    if ledger.meta("export_stamp") == stamp and stats_file.is_file() and (run_dir / "trajectories.jsonl").is_file():
        return json.loads(stats_file.read_text(encoding="utf-8"))
    _refuse_shrink(ledger, run_dir, settings)
    statistics = _export(ledger, run_dir, settings)
    ledger.set_meta({"export_stamp": stamp})
    return statistics


def _count_lines(path: Path) -> int:
    if not path.is_file():
        return 0
    with path.open("rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


def _refuse_shrink(ledger: Ledger, run_dir: Path, settings: dict[str, Any]) -> None:
    """An export never silently drops trajectories an earlier export wrote: a run whose ledger now keeps
    fewer tasks than trajectories.jsonl holds leaves every output as it is, unless the user asks
    (outputs.allow_shrink=true, or action=export, which re-applies filters on purpose)."""
    path = run_dir / "trajectories.jsonl"
    before = _count_lines(path)
    if not before:
        return
    now = ledger.db.execute("SELECT COUNT(*) FROM tasks WHERE state = 'done'").fetchone()[0]
    if now >= before:
        return
    if (settings.get("outputs") or {}).get("allow_shrink") or settings.get("action") in ("export", "compress"):
        print(f"{path.name}: {before} -> {now} trajectories", file=sys.stderr)
        return
    raise LedgerError(
        f"{path} holds {before} trajectories but the ledger now keeps only {now} (tasks re-run with another "
        "outcome, or a ledger that did not write that file): every output was left as it was, and the "
        "ledger keeps this invocation's results",
        f"to write the smaller outputs: hermes-exp action=export outputs.allow_shrink=true "
        f"run_name={settings.get('run_name')} (same config); or move {path.name} away first")


def _export(ledger: Ledger, run_dir: Path, settings: dict[str, Any]) -> dict[str, Any]:
    model, system = settings["model"]["name"], system_mode(settings)
    registry = Registry.from_settings(settings)
    stats = StatsBuilder(registry.known_tools)
    chosen = Selection(ledger, settings)
    splits = bool((settings.get("outputs") or {}).get("splits"))
    places = BatchPlaces()
    with atomic_writer(run_dir / "trajectories.jsonl") as out, _splits(run_dir, splits) as split:
        for row in ledger.rows():
            if not chosen.visible(row):
                continue
            result = json.loads(row["result"]) if row["state"] in ("done", "filtered") and row["result"] else None
            score = chosen.score(row, result) if result is not None else None
            stats.add(row, result if row["state"] == "done" else None, score)
            if result is None:
                continue
            line = None
            if row["state"] == "done" and chosen.keep(row, score):
                out.write(line := _line(row, model, system, registry, result, score))
                places.add(row["batch_num"], line)
            if split is not None and _in_splits(row, score):
                split[0 if score["passed"] else 1].write(line or _line(row, model, system, registry, result, score))
    places.write(run_dir / "trajectories.jsonl", run_dir)
    write_formats(ledger, run_dir, settings, chosen, registry)
    known = ledger.meta("dataset_tasks")
    statistics = stats.build(settings, ledger.invocations(), int(known) if known else None)
    with atomic_writer(run_dir / "statistics.json") as out:
        out.write(dumps(statistics))
    return statistics


def _in_splits(row: dict[str, Any], score: dict[str, Any] | None) -> bool:
    """passed.jsonl / failed.jsonl: scored samples that pass the quality filters (kept, or dropped only
    for failing verification), split by the verifier's verdict, whatever the selection."""
    return (score is not None and score.get("passed") is not None
            and (row["state"] == "done" or row["reason"] == "not_passed"))


@contextmanager
def _splits(run_dir: Path, wanted: bool) -> Iterator[tuple[Any, Any] | None]:
    if not wanted:
        for name in SPLITS:
            (run_dir / name).unlink(missing_ok=True)
        yield None
        return
    with atomic_writer(run_dir / SPLITS[0]) as passed, atomic_writer(run_dir / SPLITS[1]) as failed:
        yield passed, failed
