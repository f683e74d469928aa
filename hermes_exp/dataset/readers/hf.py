"""A Hugging Face dataset saved with `save_to_disk` (a folder): memory-mapped Arrow, read in batches
as stored (image and audio columns stay undecoded); `dataset.split` picks a split of a DatasetDict."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hermes_exp.errors import DatasetError
from hermes_exp.dataset.readers.base import Record
from hermes_exp.dataset.readers.parquet import BATCH_ROWS, _columns, records
from hermes_exp.optional import require


def is_hf_folder(path: Path) -> bool:
    return (path / "dataset_dict.json").is_file() or (path / "state.json").is_file()


class HfDiskSource:
    unit = "row"

    def __init__(self, path: Path, fields: dict[str, str], columns: list[str] | None, split: str | None) -> None:
        self._path = path
        self.fields = fields
        self.columns = columns
        self.split = split
        self.path = f"{path} [split {split}]" if split else str(path)

    def rows(self) -> Iterator[Record]:
        data = self._load()
        columns = _columns(self.path, data.column_names, self.columns)
        if columns is not None:
            data = data.select_columns(columns)
        batches = (table for table in data.with_format("arrow").iter(batch_size=BATCH_ROWS))
        yield from records(batches, self.path, self.fields)

    def _load(self) -> Any:
        datasets = require("datasets", DatasetError("reading a Hugging Face dataset folder needs the "
                                                    "`datasets` package", "pip install 'hermes-exp[hf]'"))
        try:
            data = datasets.load_from_disk(str(self._path))
        except Exception as exc:  # a folder save_to_disk did not write
            raise DatasetError(f"{self._path} is not a dataset saved with save_to_disk ({exc})",
                               "point dataset.path at the folder save_to_disk wrote") from exc
        if isinstance(data, datasets.DatasetDict):
            return self._split_of(data)
        if self.split is not None:
            raise DatasetError(f"{self._path} holds a single dataset, so dataset.split={self.split} does not apply",
                               "drop dataset.split (it picks a split of a saved DatasetDict)")
        return data

    def _split_of(self, data: Any) -> Any:
        splits = list(data)
        if self.split is None and len(splits) == 1:
            return data[splits[0]]
        if self.split not in splits:
            which = "dataset.split is not set" if self.split is None else f"dataset.split={self.split} is not one of them"
            raise DatasetError(f"{self._path} has splits {splits}; {which}",
                               f"set dataset.split to one of: {', '.join(splits)}")
        return data[self.split]
