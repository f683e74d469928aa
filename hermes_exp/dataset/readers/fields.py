"""Row normalisation shared by every format, so a task's content key does not depend on the file
format: `dataset.fields` renames source columns onto ours (`prompt`, `image`, `cwd`, `expected`, ...),
nulls count as absent (a columnar file has a null wherever a JSONL row has no such key), and values
become plain JSON (dates as ISO text)."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any

from hermes_exp.errors import ConfigError


class BadValue(ValueError):
    """A value that has no JSON form (binary data, NaN): the row is reported, not carried."""


def check_fields(fields: dict[str, Any] | None) -> dict[str, str]:
    """`dataset.fields` validated: ours -> the source's column name, both non-empty strings."""
    mapping = dict(fields or {})
    for ours, theirs in mapping.items():
        if not isinstance(theirs, str) or not theirs or not isinstance(ours, str) or not ours:
            raise ConfigError(f"dataset.fields.{ours}={theirs!r} must name a column of the dataset",
                              "map our field onto the source's column, e.g. dataset.fields.prompt=question")
    theirs = list(mapping.values())
    doubled = sorted({t for t in theirs if theirs.count(t) > 1})
    if doubled:
        raise ConfigError(f"dataset.fields maps column(s) {doubled} onto more than one field",
                          "map each source column onto one field")
    return mapping


def _plain(value: Any, name: str) -> Any:
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise BadValue(f"field \"{name}\" is {value}, which JSON cannot hold")
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v, f"{name}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{name}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise BadValue(f"field \"{name}\" holds binary data, which a prompt row cannot carry "
                       "(leave the column out with dataset.columns=[...])")
    raise BadValue(f"field \"{name}\" holds a {type(value).__name__}, which a prompt row cannot carry")


def normalise(raw: dict[str, Any], fields: dict[str, str]) -> dict[str, Any]:
    """The row as the runner sees it (and keys it): mapped, nulls dropped, plain JSON values.
    Raises BadValue with a message naming the field."""
    row = {str(k): v for k, v in raw.items() if v is not None}
    for ours, theirs in fields.items():
        if ours in row and ours != theirs and theirs in row:
            raise BadValue(f"has both \"{ours}\" and \"{theirs}\", which dataset.fields.{ours} maps onto it")
        if theirs in row:
            row[ours] = row.pop(theirs)
    return {k: _plain(v, k) for k, v in row.items()}
