"""Validate a dataset's rows (any format, streamed from hermes_exp.inputs) and compute each task key."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from hermes_exp.errors import DatasetError
from hermes_exp.inputs import Record, Source, open_source

log = logging.getLogger(__name__)
KEY_SCHEME = "v1"
MAX_REPORTED = 20


@dataclass(frozen=True)
class Task:
    """One sample of one prompt to run. `index` is the 0-based row index in the dataset (a JSONL file's
    line index); `sample` counts from 0 up to samples_per_prompt - 1."""

    key: str
    index: int
    row: dict[str, Any]
    sample: int = 0


class Slot(NamedTuple):
    """One task of the dataset: its row index, task key and sample number."""

    index: int
    key: str
    sample: int = 0


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def task_key(row: dict[str, Any], occurrence: int, identity: str, sample: int = 0,
             canonical: str | None = None) -> str:
    """Versioned content key: duplicates differ by occurrence, samples by their number (sample 0 keeps
    the key a run without samples_per_prompt gave it); order in the file does not matter.
    `canonical`: the row's canonical JSON when the caller already has it."""
    tail = f"\x00s{sample}" if sample else ""
    payload = f"{canonical if canonical is not None else canonical_json(row)}\x00{occurrence}\x00{identity}{tail}".encode()
    return f"{KEY_SCHEME}:{hashlib.blake2b(payload, digest_size=16).hexdigest()}"


def check_row(row: dict[str, Any]) -> str | None:
    """What is wrong with a (normalised, mapped) row, or None. The same rules for every format."""
    if "prompt" not in row:
        return "missing the required \"prompt\" field"
    prompt = row["prompt"]
    if not isinstance(prompt, str):
        return f"\"prompt\" must be a string, got {type(prompt).__name__}"
    if not prompt.strip():
        return "\"prompt\" is empty"
    return None


def _rows(source: Source) -> Iterator[tuple[Record, str | None]]:
    """Each record of the source with its problem (the reader's, else the row rules'), or None."""
    for record in source.rows():
        yield record, record.problem or check_row(record.row or {})


def open_dataset(dataset: dict[str, Any] | str | Path) -> Source:
    """The dataset config (`dataset.*`) or a bare path -> a streaming Source of its format."""
    return open_source(dataset)


@dataclass
class Scan:
    """What one validating pass over the dataset found: a Slot per task (samples_per_prompt per valid
    row), and the images named."""

    indexed: list[Slot]
    images: set[str]


RowCheck = Callable[[dict[str, Any]], "str | None"]


def scan(source: Source, identity: str, skip_invalid: bool, max_samples: int | None, samples: int = 1,
         extra_check: RowCheck | None = None) -> Scan:
    """Validate the whole dataset before any model call; key every sample of every valid row.
    `extra_check` adds checks of its own (a problem string, reported with the row's place)."""
    seen: dict[bytes, int] = {}
    keys: list[Slot] = []
    images: set[str] = set()
    problems: list[str] = []
    for record, problem in _rows(source):
        if problem is None and extra_check is not None:
            problem = extra_check(record.row)
        if problem:
            problems.append(f"{record.where}: {problem}")
            continue
        row = record.row
        if max_samples is not None and len(keys) >= max_samples * samples:
            continue
        text = canonical_json(row)  # once per row: the duplicate count and every sample's key use it
        digest = hashlib.blake2b(text.encode(), digest_size=16).digest()
        occurrence = seen.get(digest, 0)
        seen[digest] = occurrence + 1
        keys.extend(Slot(record.index, task_key(row, occurrence, identity, s, text), s) for s in range(samples))
        image = row.get("image") or row.get("docker_image")
        if isinstance(image, str) and image:
            images.add(image)
    _report(source, problems, skip_invalid)
    if not keys:
        raise DatasetError(f"dataset {source.path} has no valid prompts",
                           "add rows with a non-empty \"prompt\" (or map a column onto it: dataset.fields.prompt=...)")
    return Scan(keys, images)


def _report(source: Source, problems: list[str], skip_invalid: bool) -> None:
    if not problems:
        return
    shown = "\n".join(f"  {p}" for p in problems[:MAX_REPORTED])
    more = f"\n  ... and {len(problems) - MAX_REPORTED} more" if len(problems) > MAX_REPORTED else ""
    if skip_invalid:
        log.warning("skipping %d invalid %s(s) of %s:\n%s%s", len(problems), source.unit, source.path, shown, more)
        return
    raise DatasetError(f"{len(problems)} invalid {source.unit}(s) in {source.path}:\n{shown}{more}",
                       f"fix these {source.unit}s, or run with dataset.skip_invalid=true to skip them")


def stream_tasks(source: Source, wanted: list[Slot]) -> Iterator[Task]:
    """Yield the tasks of the `wanted` slots, reading the source again."""
    by_index: dict[int, list[Slot]] = {}
    for slot in wanted:
        by_index.setdefault(slot.index, []).append(slot)
    for record, problem in _rows(source):
        if problem is None and record.index in by_index:
            for slot in by_index[record.index]:
                yield Task(slot.key, record.index, record.row, slot.sample)
