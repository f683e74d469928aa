"""Parquet: read in record batches (never the whole table), optionally only some columns."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hermes_exp.errors import DatasetError
from hermes_exp.dataset.readers.base import Record
from hermes_exp.dataset.readers.fields import BadValue, normalise
from hermes_exp.optional import require

BATCH_ROWS = 1024


def pyarrow_module() -> Any:
    return require("pyarrow.parquet", DatasetError("reading Parquet needs pyarrow, which is not installed",
                                                   "pip install 'hermes-exp[parquet]'"))


def records(batches: Iterator[Any], where: str, fields: dict[str, str]) -> Iterator[Record]:
    """Records from Arrow record batches (shared with the Hugging Face reader)."""
    index = 0
    for batch in batches:
        for raw in batch.to_pylist():
            place = f"{where}: row {index + 1}"
            try:
                yield Record(index, place, normalise(raw, fields))
            except BadValue as exc:
                yield Record(index, place, None, str(exc))
            index += 1


class ParquetSource:
    unit = "row"

    def __init__(self, path: Path, fields: dict[str, str], columns: list[str] | None) -> None:
        self.path = str(path)
        self._path = path
        self.fields = fields
        self.columns = columns

    def rows(self) -> Iterator[Record]:
        pq = pyarrow_module()
        try:
            handle = pq.ParquetFile(self._path)
        except Exception as exc:  # pyarrow raises ArrowInvalid / OSError for a file it cannot read
            raise DatasetError(f"{self.path} is not a readable Parquet file ({exc})",
                               "check dataset.path, or set dataset.format to the file's real format") from exc
        with handle:
            columns = _columns(self.path, handle.schema_arrow.names, self.columns)
            yield from records(handle.iter_batches(batch_size=BATCH_ROWS, columns=columns), self.path, self.fields)


def _columns(path: str, names: list[str], wanted: list[str] | None) -> list[str] | None:
    if wanted is None:
        return None
    missing = [c for c in wanted if c not in names]
    if missing:
        raise DatasetError(f"dataset.columns names column(s) {missing} that {path} does not have",
                           f"choose from: {', '.join(names)}")
    return list(wanted)
