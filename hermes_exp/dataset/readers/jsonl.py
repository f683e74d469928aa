"""JSONL: one JSON object per line, read line by line, in binary: a line ends at b"\\n" only (a lone
carriage return inside a line is JSON whitespace, not a line break), and a line that is not UTF-8 is
one invalid line, reported with its byte offset, not the end of the whole file. A UTF-8 byte order mark
at the start of the file is skipped (the row's key is the same as without it)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from hermes_exp.errors import DatasetError
from hermes_exp.dataset.readers.base import Record
from hermes_exp.dataset.readers.fields import BadValue, normalise


BOM = b"\xef\xbb\xbf"  # UTF-8's byte order mark, at the start of the file only


class JsonlSource:
    unit = "line"

    def __init__(self, path: Path, fields: dict[str, str]) -> None:
        self.path = str(path)
        self._path = path
        self.fields = fields

    def rows(self) -> Iterator[Record]:
        try:
            fh = self._path.open("rb")
        except OSError as exc:
            raise DatasetError(f"cannot read the dataset {self.path}: {exc}", "check dataset.path") from exc
        with fh:
            offset = 0
            for index, raw in enumerate(fh):
                if index == 0 and raw.startswith(BOM):  # Windows tools (Notepad, PowerShell) start with one
                    raw, offset = raw[len(BOM):], len(BOM)
                if raw.strip():
                    yield self._record(index, offset, raw)
                offset += len(raw)

    def _record(self, index: int, offset: int, raw: bytes) -> Record:
        where = f"{self.path}:{index + 1}"
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return Record(index, where, None, f"not UTF-8 text ({exc.reason} at byte {offset + exc.start} of the "
                                              f"file, column {exc.start + 1} of the line)")
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            return Record(index, where, None, f"not valid JSON ({exc.msg} at column {exc.colno})")
        except RecursionError:
            return Record(index, where, None, "nested too deeply to read (at most 64 levels of lists and objects)")
        if not isinstance(row, dict):
            return Record(index, where, None,
                          f"a JSON {type(row).__name__} where an object with a \"prompt\" field was expected")
        try:
            return Record(index, where, normalise(row, self.fields))
        except BadValue as exc:
            return Record(index, where, None, str(exc))
