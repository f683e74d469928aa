"""Read and validate a JSONL dataset of prompts, streaming; compute each row's task key."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_exp.errors import DatasetError

log = logging.getLogger(__name__)
KEY_SCHEME = "v1"
MAX_REPORTED = 20


@dataclass(frozen=True)
class Task:
    """One prompt to run. `index` is the 0-based line index in the dataset file."""

    key: str
    index: int
    row: dict[str, Any]


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def task_key(row: dict[str, Any], occurrence: int, identity: str) -> str:
    """Versioned content key: duplicates differ by occurrence; order in the file does not matter."""
    payload = f"{canonical_json(row)}\x00{occurrence}\x00{identity}".encode()
    return f"{KEY_SCHEME}:{hashlib.blake2b(payload, digest_size=16).hexdigest()}"


def _check_line(line: str) -> tuple[dict[str, Any] | None, str | None]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc.msg} at column {exc.colno})"
    if not isinstance(row, dict):
        return None, f"a JSON {type(row).__name__} where an object with a \"prompt\" field was expected"
    if "prompt" not in row:
        return None, "missing the required \"prompt\" field"
    prompt = row["prompt"]
    if not isinstance(prompt, str):
        return None, f"\"prompt\" must be a string, got {type(prompt).__name__}"
    if not prompt.strip():
        return None, "\"prompt\" is empty"
    return row, None


def _rows(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """(line index, row, problem) for each non-blank line."""
    with path.open("r", encoding="utf-8", errors="strict") as fh:
        for index, line in enumerate(fh):
            if line.strip():
                yield (index, *_check_line(line))


def open_dataset(path: str | Path) -> Path:
    p = Path(path).expanduser()
    if not p.is_file():
        raise DatasetError(f"dataset file not found: {p}",
                           "set dataset.path=... to an existing JSONL file (one {\"prompt\": ...} object per line)")
    return p


@dataclass
class Scan:
    """What one validating pass over the dataset found: (line index, key) per task, images named."""

    indexed: list[tuple[int, str]]
    images: set[str]


def scan(path: Path, identity: str, skip_invalid: bool, max_samples: int | None) -> Scan:
    """Validate the whole file before any model call; key every valid row."""
    seen: dict[bytes, int] = {}
    keys: list[tuple[int, str]] = []
    images: set[str] = set()
    problems: list[str] = []
    try:
        for index, row, problem in _rows(path):
            if problem:
                problems.append(f"{path}:{index + 1}: {problem}")
                continue
            if max_samples is not None and len(keys) >= max_samples:
                continue
            digest = hashlib.blake2b(canonical_json(row).encode(), digest_size=16).digest()
            occurrence = seen.get(digest, 0)
            seen[digest] = occurrence + 1
            keys.append((index, task_key(row, occurrence, identity)))
            image = row.get("image") or row.get("docker_image")
            if isinstance(image, str) and image:
                images.add(image)
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})",
                           "save the dataset as UTF-8 JSONL") from exc
    _report(path, problems, skip_invalid)
    if not keys:
        raise DatasetError(f"dataset {path} has no valid prompts",
                           "add lines like {\"prompt\": \"...\"} to the file")
    return Scan(keys, images)


def _report(path: Path, problems: list[str], skip_invalid: bool) -> None:
    if not problems:
        return
    shown = "\n".join(f"  {p}" for p in problems[:MAX_REPORTED])
    more = f"\n  ... and {len(problems) - MAX_REPORTED} more" if len(problems) > MAX_REPORTED else ""
    if skip_invalid:
        log.warning("skipping %d invalid line(s) of %s:\n%s%s", len(problems), path, shown, more)
        return
    raise DatasetError(f"{len(problems)} invalid line(s) in {path}:\n{shown}{more}",
                       "fix these lines, or run with dataset.skip_invalid=true to skip them")


def stream_tasks(path: Path, wanted: dict[int, str]) -> Iterator[Task]:
    """Yield the tasks whose line index is in `wanted` (index -> key), reading the file again."""
    for index, row, problem in _rows(path):
        if problem is None and index in wanted:
            yield Task(wanted[index], index, row)
