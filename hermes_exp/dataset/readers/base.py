"""The reader Protocol and the record it yields; shared by every input format."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Record:
    """One row of the source. `index` is 0-based (a JSONL file's line index; else the row number);
    `where` names it for a person ("data.csv:12", "data.parquet: row 11"). Exactly one of `row` and
    `problem` is set: `row` is already normalised and mapped by `dataset.fields`."""

    index: int
    where: str
    row: dict[str, Any] | None
    problem: str | None = None


class Source(Protocol):
    """A dataset in one format. `rows()` streams the records in source order and may be called again
    (a run scans once to validate and key, then reads again to dispatch). It raises DatasetError when
    the source as a whole cannot be read (missing, not UTF-8, not a table, no such split)."""

    path: str
    unit: str  # "line" or "row": what the validation messages count

    def rows(self) -> Iterator[Record]: ...

