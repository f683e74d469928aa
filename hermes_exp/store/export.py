"""Export the ledger to trajectories.jsonl, batch_N.jsonl and statistics.json, atomically.

Each file is written to a temp file and renamed over the old one, so a kill at any moment leaves
the old file or the new one, never a torn line. An unchanged file is not touched."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hermes_exp.errors import LedgerError
from hermes_exp.store.atif import ATIF_FILE
from hermes_exp.store.atomic import atomic_writer
from hermes_exp.store.batches import BatchPlaces, batch_name
from hermes_exp.store.export_reuse import INDEX, OPENAI_FILE, Previous, Recorder, Stale, settings_key
from hermes_exp.store.export_rows import Tasks
from hermes_exp.store.formats import PARQUET_FILE, write_parquet
from hermes_exp.store.ledger import Ledger
from hermes_exp.store.refilter import describe_filters
from hermes_exp.store.sharegpt import system_mode
from hermes_exp.store.stats import StatsBuilder, dumps
from hermes_exp.store.samples import Selection
from hermes_exp.tools.registry import Registry


log = logging.getLogger(__name__)
EXPORT_VERSION = 2  # bump when the export code changes what it writes
SPLITS = ("passed.jsonl", "failed.jsonl")
TRAJECTORIES = "trajectories.jsonl"


def _used(settings: dict[str, Any]) -> list[Any]:
    """The settings the outputs depend on."""
    outputs = settings.get("outputs") or {}
    return [EXPORT_VERSION, settings["model"]["name"], settings["run_name"], settings["distribution"]["name"],
            settings["batch_size"], outputs.get("formats"), system_mode(settings), settings.get("verifier"),
            settings.get("samples_per_prompt", 1), settings.get("selection"), outputs.get("splits")]


def _stamp(ledger: Ledger, settings: dict[str, Any]) -> str:
    scores = ledger.db.execute("SELECT COUNT(*), MAX(scored_at) FROM scores").fetchone()
    filters = (settings.get("filters") or {}).get("rules")  # statistics.json names them
    return json.dumps([ledger.fingerprint(), ledger.meta("dataset_tasks"), list(scores), _used(settings), filters],
                      default=str)


def export(ledger: Ledger, run_dir: Path, settings: dict[str, Any], formats: Sequence[str],
           selection: str) -> dict[str, Any]:
    """Rewrite every output from the ledger in `formats` (checked: store/formats.chosen_formats), of the
    samples `selection` keeps (checked: store/samples.selection_mode); return the statistics. When neither the ledger nor the
    settings the outputs depend on changed since the last export, the files are left as they are; else
    only the tasks that changed are rendered, the others' lines copied from the last export's files
    while its index describes them (store/export_reuse.py)."""
    stamp = _stamp(ledger, settings)
    stats_file = run_dir / "statistics.json"
    if ledger.meta("export_stamp") == stamp and stats_file.is_file() and (run_dir / "trajectories.jsonl").is_file():
        return json.loads(stats_file.read_text(encoding="utf-8"))
    registry = Registry.from_settings(settings)
    key = settings_key(_used(settings), registry.known_tools, settings)
    indexed = (run_dir / INDEX).is_file()
    previous = Previous.open(run_dir, key)  # None: every line is rendered
    try:
        before = _refuse_shrink(ledger, run_dir, settings,
                                previous.lines(TRAJECTORIES) if previous is not None else None)
        tasks = Tasks(ledger, settings, registry, previous)
        try:
            statistics = _export(ledger, run_dir, settings, tasks, key, formats, selection)
        except Stale:  # the index pointed at a line that is not there: render every line
            tasks = Tasks(ledger, settings, registry, None)  # (its .previous, None, tells the log below)
            statistics = _export(ledger, run_dir, settings, tasks, key, formats, selection)
        if tasks.previous is not None:
            log.info("export: %d of %d task(s) rendered, the others' lines copied from the last export",
                     tasks.rendered, tasks.seen)
        elif indexed:
            log.info("export: every line rendered (the settings or the output files changed since the last export)")
    finally:
        if previous is not None:
            previous.close()
    written = statistics["exported"][TRAJECTORIES]
    if before and written < before:  # said with the count the file now holds, whatever shrank it
        print(f"{TRAJECTORIES}: {before} -> {written} trajectories", file=sys.stderr)
    ledger.set_meta({"export_stamp": stamp})
    return statistics


def _count_lines(path: Path) -> int:
    if not path.is_file():
        return 0
    with path.open("rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


def _refuse_shrink(ledger: Ledger, run_dir: Path, settings: dict[str, Any], counted: int | None) -> int:
    """An export never silently drops trajectories an earlier export wrote: a run whose ledger now keeps
    fewer tasks than trajectories.jsonl holds leaves every output as it is, unless the user asks
    (outputs.allow_shrink=true, or action=export, which re-applies filters on purpose). Returns the
    lines the file held (0: none)."""
    path = run_dir / TRAJECTORIES
    before = _count_lines(path) if counted is None else counted  # the index's count, of this very file
    if not before:
        return 0
    now = ledger.db.execute("SELECT COUNT(*) FROM tasks WHERE state = 'done'").fetchone()[0]
    if now >= before or (settings.get("outputs") or {}).get("allow_shrink") \
            or settings.get("action") in ("export", "compress"):
        return before
    raise LedgerError(
        f"{path} holds {before} trajectories but the ledger now keeps only {now} (tasks re-run with another "
        "outcome, or a ledger that did not write that file): every output was left as it was, and the "
        "ledger keeps this invocation's results",
        f"to write the smaller outputs: hermes-exp action=export outputs.allow_shrink=true "
        f"run_name={settings.get('run_name')} (same config); or move {path.name} away first")


def _export(ledger: Ledger, run_dir: Path, settings: dict[str, Any], tasks: Tasks, key: str,
            formats: Sequence[str], selection: str) -> dict[str, Any]:
    stats = StatsBuilder(tasks.registry.known_tools)
    chosen = Selection(ledger, settings, selection, ranked=tasks.ranked)
    splits = bool((settings.get("outputs") or {}).get("splits"))
    wanted = {OPENAI_FILE: "openai" in formats, ATIF_FILE: "atif" in formats}
    places, kept = BatchPlaces(), _Kept()
    record = Recorder(run_dir)
    try:
        with atomic_writer(run_dir / TRAJECTORIES, binary=True) as out, _splits(run_dir, splits) as split, \
                _optional(run_dir / OPENAI_FILE, wanted[OPENAI_FILE]) as oa, \
                _optional(run_dir / ATIF_FILE, wanted[ATIF_FILE]) as atif:
            files = _write(tasks, chosen, stats, [out, *(split or (None, None))], {OPENAI_FILE: oa, ATIF_FILE: atif},
                           places, kept, record)
        batches = places.write(run_dir / TRAJECTORIES, run_dir, kept.unchanged(tasks.previous))
        if "parquet" in formats:
            write_parquet(run_dir)
        else:  # an earlier export's parquet file would not match the files beside it (as the splits)
            (run_dir / PARQUET_FILE).unlink(missing_ok=True)
        for name in (n for n, want in wanted.items() if not want):
            (run_dir / name).unlink(missing_ok=True)
        known = ledger.meta("dataset_tasks")
        statistics = stats.build(settings, ledger.invocations(), int(known) if known else None)
        # what the files beside it hold, and what chose it (the summary and the report print these)
        statistics.update(exported={k: v for k, v in files.items() if v is not None},
                          selection=settings.get("selection") or "all", filters=describe_filters(settings))
        with atomic_writer(run_dir / "statistics.json") as fh:
            fh.write(dumps(statistics))
        if tasks.previous is not None:
            tasks.previous.close()  # the files it read are replaced: the old index goes with them
        record.commit(key, {OPENAI_FILE: None, ATIF_FILE: None, **files}, batches)
    except BaseException:
        record.abort()
        raise
    return statistics


def _write(tasks: Tasks, chosen: Selection, stats: StatsBuilder, outs: list[Any], formats: dict[str, Any],
           places: BatchPlaces, kept: _Kept, record: Recorder) -> dict[str, int | None]:
    """Every visible task's lines into trajectories.jsonl, the splits and the `formats` files (OpenAI,
    ATIF: each task's line made once), its statistics, its batch place and its index record; the lines
    each file got."""
    sinks = [_Sink(fh) if fh is not None else None for fh in outs]  # trajectories, passed, failed
    extras = {name: _Sink(fh) for name, fh in formats.items() if fh is not None}
    oa_sink = extras.get(OPENAI_FILE)
    for task in tasks.each(chosen.visible):
        row = task.row
        done = row["state"] == "done"
        stats.add(row, task.facts if done else None, task.score)
        if task.facts is None:
            if done and oa_sink is not None:  # a done row without a result: its OpenAI record, as it always was
                empty = tasks.book.get(row["key"], {})
                if chosen.keep(row, empty):
                    oa_sink.put(tasks.openai_line(task, empty))
            continue
        where, at = _write_task(tasks, chosen, task, sinks, extras, places, kept)
        if isinstance(row["prompt_index"], int):
            facts = task.entry.raw if task.entry is not None else task.facts
            record.add(row["key"], task.version, row["prompt_index"], where, at[OPENAI_FILE], at[ATIF_FILE],
                       task.shown, facts)
    files: dict[str, int | None] = {TRAJECTORIES: sinks[0].count}  # type: ignore[union-attr]
    files.update({name: sink.count if sink is not None else None for name, sink in zip(SPLITS, sinks[1:])})
    files.update({name: sink.count for name, sink in extras.items()})
    return files


def _write_task(tasks: Tasks, chosen: Selection, task: Any, sinks: list[_Sink | None], extras: dict[str, _Sink],
                places: BatchPlaces, kept: _Kept) -> tuple[tuple[int, int, int], dict[str, tuple[int, int]]]:
    """One task with a result: its line into trajectories.jsonl (and its OpenAI and ATIF records) when kept,
    into passed.jsonl or failed.jsonl when scored. Returns where the index finds its line (file 1 to 3,
    offset, length; file 0: nowhere) and, per format file, its record (offset, length; -1: none)."""
    row, score = task.row, task.score
    line, where = None, (0, 0, 0)
    at = {OPENAI_FILE: (0, -1), ATIF_FILE: (0, -1)}
    if row["state"] == "done" and chosen.keep(row, score):
        line, source = tasks.line(task)
        where = (1, *sinks[0].put(line))  # type: ignore[union-attr]
        places.add_size(row["batch_num"], len(line))
        kept.add(row["batch_num"], source == 1)
        for name, sink in extras.items():
            at[name] = sink.put(tasks.format_line(name, task, score))
    if sinks[1] is not None and _in_splits(row, score):
        if line is None:
            line, _ = tasks.line(task)
        n = 1 if score["passed"] else 2  # type: ignore[index]
        placed = sinks[n].put(line)  # type: ignore[union-attr]
        where = where if where[0] else (n + 1, *placed)
    return where, at


class _Sink:
    """One output file being written: the bytes and the lines it got so far."""

    def __init__(self, fh: Any) -> None:
        self.fh, self.end, self.count = fh, 0, 0

    def put(self, data: bytes) -> tuple[int, int]:
        """Append `data`; return where it stands (offset, length)."""
        at = (self.end, len(data))
        self.fh.write(data)
        self.end, self.count = self.end + len(data), self.count + 1
        return at


class _Kept:
    """Per batch: the kept lines, and those copied from the old trajectories.jsonl (the same line of the
    same task in the same batch: a batch of only such lines, as many as it had, is the same file)."""

    def __init__(self) -> None:
        self.lines: dict[int | None, list[int]] = {}

    def add(self, batch: int | None, copied: bool) -> None:
        counts = self.lines.setdefault(batch, [0, 0])
        counts[0] += 1
        counts[1] += copied

    def unchanged(self, previous: Previous | None) -> frozenset[str]:
        if previous is None:
            return frozenset()
        return frozenset(batch_name(b) for b, (n, copied) in self.lines.items()
                         if n == copied and previous.batch_kept(batch_name(b), n))


def _in_splits(row: dict[str, Any], score: dict[str, Any] | None) -> bool:
    """passed.jsonl / failed.jsonl: scored samples that pass the quality filters (kept, or dropped only
    for failing verification), split by the verifier's verdict, whatever the selection; a verifier_suspect
    one is in neither (its zero may be the environment's)."""
    return (score is not None and score.get("passed") is not None and not score.get("suspect")
            and (row["state"] == "done" or row["reason"] == "not_passed"))


@contextmanager
def _splits(run_dir: Path, wanted: bool) -> Iterator[tuple[Any, Any] | None]:
    if not wanted:
        for name in SPLITS:
            (run_dir / name).unlink(missing_ok=True)
        yield None
        return
    with atomic_writer(run_dir / SPLITS[0], binary=True) as passed, \
            atomic_writer(run_dir / SPLITS[1], binary=True) as failed:
        yield passed, failed


@contextmanager
def _optional(path: Path, wanted: bool) -> Iterator[Any]:
    if not wanted:
        yield None
        return
    with atomic_writer(path, binary=True) as out:
        yield out
