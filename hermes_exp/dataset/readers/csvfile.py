"""CSV (and TSV): a header row of column names, then one row per prompt; read row by row.
Every value is text, and an empty cell counts as absent (CSV cannot tell empty from missing)."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from hermes_exp.errors import DatasetError
from hermes_exp.dataset.readers.base import Record
from hermes_exp.dataset.readers.fields import BadValue, normalise


class CsvSource:
    unit = "line"

    def __init__(self, path: Path, fields: dict[str, str]) -> None:
        self.path = str(path)
        self._path = path
        self.fields = fields
        self.delimiter = "\t" if path.suffix.lower() == ".tsv" else ","

    def rows(self) -> Iterator[Record]:
        csv.field_size_limit(1 << 30)  # a long prompt is one cell; the default 128 KiB is too small
        try:
            with self._path.open("r", encoding="utf-8-sig", errors="strict", newline="") as fh:
                # strict: a quote opened and never closed is an error, not a cell that swallows every
                # later line of the file (silently: the rest of the dataset would become one prompt)
                reader = csv.reader(fh, delimiter=self.delimiter, strict=True)
                line = 0
                header = next(reader, None)
                if header is None:
                    return
                self._check_header(header)
                line, index = reader.line_num, 0
                for cells in reader:
                    start, line = line + 1, reader.line_num
                    if not any(c.strip() for c in cells):
                        continue
                    yield self._record(index, f"{self.path}:{start}", header, cells)
                    index += 1
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{self.path} is not UTF-8 text ({exc.reason} at byte {exc.start})",
                               "save the CSV as UTF-8") from exc
        except csv.Error as exc:
            raise DatasetError(f"{self.path}:{line + 1}: not readable as CSV from this line on ({exc})",
                               "close the quoted cell that starts there (a quote inside a quoted cell is written "
                               "twice: \"\"), or convert the file to JSONL or Parquet") from exc

    def _check_header(self, header: list[str]) -> None:
        doubled = sorted({h for h in header if header.count(h) > 1})
        if doubled or not all(h.strip() for h in header):
            raise DatasetError(f"{self.path}:1: the header row needs distinct, non-empty column names "
                               f"(got {header})", "name every column once in the first line")
        column = self.fields.get("prompt", "prompt")
        if column not in header and "prompt" not in header:  # every row would be refused for the same reason
            given = f"dataset.fields.prompt={column} names" if column != "prompt" else "there is"
            add = "" if "prompt" in self.fields else "+"  # Hydra adds a key to the (empty) map with a +
            raise DatasetError(f"{self.path}:1: {given} no \"{column}\" column; the columns are: {', '.join(header)}",
                               f"name the column that holds the prompts: {add}dataset.fields.prompt=<column>, "
                               f"e.g. {add}dataset.fields.prompt={header[0]}")

    def _record(self, index: int, where: str, header: list[str], cells: list[str]) -> Record:
        if len(cells) > len(header):
            return Record(index, where, None, f"{len(cells)} cells where the header has {len(header)} columns")
        raw = {name: (value if value != "" else None) for name, value in zip(header, cells)}
        try:
            return Record(index, where, normalise(raw, self.fields))
        except BadValue as exc:
            return Record(index, where, None, str(exc))
