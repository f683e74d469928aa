"""Which reader a dataset gets: `dataset.format`, else the path's extension (a folder: Harbor task
folders, else HF `save_to_disk`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hermes_exp.errors import ConfigError, DatasetError
from hermes_exp.dataset.readers.base import Source
from hermes_exp.dataset.readers.fields import check_fields

FORMATS = ("auto", "jsonl", "csv", "parquet", "hf", "harbor")
EXTENSIONS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv", ".tsv": "csv",
              ".parquet": "parquet", ".pq": "parquet"}


def open_source(dataset: dict[str, Any] | str | Path) -> Source:
    """The dataset config (or a bare path, read as JSONL by extension) -> its Source."""
    cfg = {"path": dataset} if isinstance(dataset, (str, Path)) else dict(dataset)
    path = Path(str(cfg.get("path") or "")).expanduser()
    fmt = cfg.get("format") or "auto"
    if fmt not in FORMATS:
        raise ConfigError(f"dataset.format={fmt!r} is not a known format", f"choose from: {', '.join(FORMATS)}")
    if not path.exists():
        raise DatasetError(f"dataset file not found: {path}",
                           "set dataset.path=... to an existing JSONL, CSV or Parquet file, a folder "
                           "written by save_to_disk, or a folder of Harbor tasks")
    fmt = _detect(path) if fmt == "auto" else fmt
    fields = check_fields(cfg.get("fields"))
    columns = cfg.get("columns")
    if columns is not None and (not isinstance(columns, list) or not all(isinstance(c, str) for c in columns)):
        raise ConfigError(f"dataset.columns={columns!r} must be a list of column names",
                          "e.g. dataset.columns=[question,answer], or null for every column")
    return _build(fmt, path, fields, columns, cfg.get("split"))


def dataset_base_dir(dataset: dict[str, Any] | None) -> str:
    """Where a row's relative paths (files, tests, build contexts) start: the dataset file's folder,
    or a Harbor dataset's own folder."""
    cfg = dict(dataset or {})
    if not cfg.get("path"):
        return "."
    path = Path(str(cfg["path"])).expanduser()
    fmt = cfg.get("format") or "auto"
    if fmt == "harbor" or (fmt == "auto" and path.is_dir() and _detect(path) == "harbor"):
        from hermes_exp.dataset.readers.harbor import base_dir

        return str(base_dir(path))
    return str(path.parent)


def _build(fmt: str, path: Path, fields: dict[str, str], columns: list[str] | None, split: str | None) -> Source:
    if fmt == "harbor":
        from hermes_exp.dataset.readers.harbor import HarborSource

        if fields or columns:
            raise ConfigError("dataset.fields and dataset.columns do not apply to a Harbor dataset",
                              "drop them: each task folder's instruction.md is the prompt")
        return HarborSource(path)
    if fmt == "hf":
        from hermes_exp.dataset.readers.hf import HfDiskSource

        return HfDiskSource(path, fields, columns, split)
    if path.is_dir():
        raise DatasetError(f"dataset.path {path} is a folder, but dataset.format={fmt} reads a file",
                           "point dataset.path at the file, or use dataset.format=hf for a save_to_disk folder")
    if fmt == "parquet":
        from hermes_exp.dataset.readers.parquet import ParquetSource

        return ParquetSource(path, fields, columns)
    if fmt == "csv":
        from hermes_exp.dataset.readers.csvfile import CsvSource

        return CsvSource(path, fields)
    from hermes_exp.dataset.readers.jsonl import JsonlSource

    return JsonlSource(path, fields)


def _detect(path: Path) -> str:
    if path.is_dir():
        from hermes_exp.dataset.readers.harbor import is_harbor_folder
        from hermes_exp.dataset.readers.hf import is_hf_folder

        if is_hf_folder(path):
            return "hf"
        if is_harbor_folder(path):
            return "harbor"
        raise DatasetError(f"dataset.path {path} is a folder but not one written by save_to_disk "
                           "(no dataset_dict.json or state.json in it), nor Harbor task folders (no task.toml)",
                           "point dataset.path at a dataset file, a save_to_disk folder or a folder of Harbor tasks")
    return EXTENSIONS.get(path.suffix.lower(), "jsonl")  # any other file is JSONL, as it always was
