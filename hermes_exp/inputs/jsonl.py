"""JSONL: one JSON object per line, read line by line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from hermes_exp.errors import DatasetError
from hermes_exp.inputs.base import Record
from hermes_exp.inputs.fields import BadValue, normalise


class JsonlSource:
    unit = "line"

    def __init__(self, path: Path, fields: dict[str, str]) -> None:
        self.path = str(path)
        self._path = path
        self.fields = fields

    def rows(self) -> Iterator[Record]:
        try:
            with self._path.open("r", encoding="utf-8", errors="strict") as fh:
                for index, line in enumerate(fh):
                    if line.strip():
                        yield self._record(index, line)
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{self.path} is not UTF-8 text ({exc.reason} at byte {exc.start})",
                               "save the dataset as UTF-8 JSONL") from exc

    def _record(self, index: int, line: str) -> Record:
        where = f"{self.path}:{index + 1}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            return Record(index, where, None, f"not valid JSON ({exc.msg} at column {exc.colno})")
        if not isinstance(row, dict):
            return Record(index, where, None,
                          f"a JSON {type(row).__name__} where an object with a \"prompt\" field was expected")
        try:
            return Record(index, where, normalise(row, self.fields))
        except BadValue as exc:
            return Record(index, where, None, str(exc))
