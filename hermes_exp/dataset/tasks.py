"""Validate a dataset's rows (any format, streamed from hermes_exp.dataset.readers) and compute each task key."""

from __future__ import annotations

import hashlib
import json
import logging
import stat
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from hermes_exp.settings.canonical import canonical_json  # imported from here by its users too
from hermes_exp.settings.count_limits import MAX_TASKS, too_many_tasks
from hermes_exp.errors import DatasetError
from hermes_exp.dataset.readers import Record, Source, open_source
from hermes_exp.dataset.slots import RowOffsets, Slot, SlotList  # Slot: imported from here by its users

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


def task_key(row: dict[str, Any], occurrence: int, identity: str, sample: int = 0,
             canonical: str | None = None) -> str:
    """Versioned content key: duplicates differ by occurrence, samples by their number (sample 0 keeps
    the key a run without samples_per_prompt gave it); order in the file does not matter.
    `canonical`: the row's canonical JSON when the caller already has it."""
    tail = f"\x00s{sample}" if sample else ""
    payload = f"{canonical if canonical is not None else canonical_json(row)}\x00{occurrence}\x00{identity}{tail}".encode()
    return f"{KEY_SCHEME}:{hashlib.blake2b(payload, digest_size=16).hexdigest()}"


MAX_DEPTH = 64  # nesting levels a row may have: deeper rows could not be saved or exported reliably


def _depth(value: Any) -> int:
    """How deeply lists and objects nest in `value` (iteratively: no recursion limit to hit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def _canonical(row: dict[str, Any]) -> tuple[str | None, str | None]:
    """The row's canonical JSON, or what makes it unusable (nested too deeply to save and export)."""
    try:
        text = canonical_json(row)
    except (RecursionError, ValueError):
        return None, f"nested too deeply (at most {MAX_DEPTH} levels of lists and objects)"
    if text.count("[") + text.count("{") > MAX_DEPTH and (depth := _depth(row)) > MAX_DEPTH:  # cheap test first
        return None, f"nested {depth} levels deep (at most {MAX_DEPTH} levels of lists and objects)"
    return text, None


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
    row), and the images named.

    With a spool, each valid row is written there as it is keyed (`offsets`: row index -> position):
    tasks then run the content they were keyed by, even if the dataset changes during the run.
    A scan's own `indexed` and `offsets` are packed (slots.py: ~32 bytes a task)."""

    indexed: Sequence[Slot]
    images: set[str]
    spool: IO[bytes] | None = None
    offsets: Mapping[int, int] = field(default_factory=dict)
    stamp: tuple[int, int, int] | None = None
    source: Source | None = None  # what was scanned (e.g. a Harbor folder, whose tasks bring their images)
    problems: int = 0  # invalid rows skipped (dataset.skip_invalid)


RowCheck = Callable[[dict[str, Any]], "str | None"]


def path_signature(path: Any) -> tuple[int, int, int, int, bool] | None:
    """(device, inode, size, mtime in ns, whether it is a regular file) of a dataset path; None when
    there is nothing to stat (a hub name, a path that is gone)."""
    try:
        st = Path(path).stat()
    except (OSError, TypeError, ValueError):
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, stat.S_ISREG(st.st_mode)


def source_stamp(source: Source) -> tuple[int, int, int] | None:
    """(inode, size, mtime in ns) of the dataset path, a file or a folder: changes when it is replaced
    or rewritten (a folder: when an entry is added, removed or renamed)."""
    signature = path_signature(source.path)
    return signature[1:4] if signature else None


def scan(source: Source, identity: str, skip_invalid: bool, max_samples: int | None, samples: int = 1,
         extra_check: RowCheck | None = None, spool: IO[bytes] | None = None) -> Scan:
    """Validate the whole dataset before any model call; key every sample of every valid row (and spool
    the row). `extra_check` adds checks of its own (a problem string, reported with the row's place)."""
    seen: dict[bytes, int] = {}
    found = Scan(SlotList(), set(), spool, RowOffsets(), stamp=source_stamp(source), source=source)
    problems: list[str] = []
    for record, problem in _rows(source):
        text = None
        if not problem:
            text, problem = _canonical(record.row)
        if problem is None and extra_check is not None:
            problem = extra_check(record.row)
        if problem:
            problems.append(f"{record.where}: {problem}")
            continue
        row = record.row
        if max_samples is not None and len(found.indexed) >= max_samples * samples:
            continue
        if len(found.indexed) + samples > MAX_TASKS:  # refused before its keys are made, not after hours
            raise too_many_tasks(samples, len(found.indexed) // samples + 1, source.path)
        digest = hashlib.blake2b(text.encode(), digest_size=16).digest()  # text: the row's canonical JSON, once
        occurrence = seen.get(digest, 0)
        seen[digest] = occurrence + 1
        for s in range(samples):
            found.indexed.add(record.index, task_key(row, occurrence, identity, s, text), s)
        if spool is not None:
            found.offsets[record.index] = spool.tell()
            spool.write(json.dumps(row, ensure_ascii=False).encode() + b"\n")
        image = row.get("image") or row.get("docker_image")
        if isinstance(image, str) and image:
            found.images.add(image)
    _report(source, problems, skip_invalid)
    found.problems = len(problems)
    if not found.indexed:
        raise DatasetError(f"dataset {source.path} has no valid prompts",
                           "add rows with a non-empty \"prompt\" (or map a column onto it: dataset.fields.prompt=...)")
    return found


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


def stream_tasks(found: Scan, wanted: list[Slot]) -> Iterator[Task]:
    """Yield the tasks of the `wanted` slots, in the scan's order, with the row as it was when it was
    keyed: read back from the scan's spool, never from the dataset again."""
    if found.spool is None:
        raise ValueError("stream_tasks needs a Scan made with a spool")
    chosen = {(slot.index, slot.key) for slot in wanted}
    for slot in found.indexed:
        if (slot.index, slot.key) in chosen:
            found.spool.seek(found.offsets[slot.index])
            yield Task(slot.key, slot.index, json.loads(found.spool.readline()), slot.sample)


def changed_since(source: Source, found: Scan) -> bool:
    """Whether the dataset was rewritten or replaced after the scan read it."""
    return found.stamp is not None and source_stamp(source) != found.stamp
