"""Which rows of the dataset a run covers: `dataset.where` (field=value), `dataset.ids_file` (with
`dataset.id_field`), then `dataset.shuffle` (a seeded order), `dataset.slice` ("start:stop") and
`dataset.shard` ("I/N": the rows whose content hash is I modulo N, for Slurm array jobs).

where/ids depend on a row's content only, so identical rows are kept or dropped together and every
task keeps the key (and occurrence number) it has without a selection. The shuffled order comes from
each row's content and the seed, not from the run's identity, so every job of a sweep and every
invocation picks the same rows; appending rows to the dataset does not reorder the others. A row's shard
comes from its content (and occurrence) alone too: appended rows never move a row to another shard."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from hermes_exp.errors import ConfigError, DatasetError
from hermes_exp.dataset.readers import Record, Source
from hermes_exp.dataset.slots import SlotList

log = logging.getLogger(__name__)
SHARD_HINT = ("write dataset.shard=I/N with 0 <= I < N, e.g. dataset.shard=0/4 .. dataset.shard=3/4 "
              "(Slurm: dataset.shard=$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT), or dataset.shard=null")
SLICE_HINT = "write dataset.slice=START:STOP (Python slice bounds, either may be empty), e.g. dataset.slice=0:100"


def _text(value: Any) -> str:
    from hermes_exp.dataset.tasks import canonical_json

    return value if isinstance(value, str) else canonical_json(value)


@dataclass(frozen=True)
class Selection:
    where: dict[str, frozenset[str]] = field(default_factory=dict)  # field -> accepted values (as text)
    ids: frozenset[str] | None = None
    id_field: str = "id"
    ids_file: str | None = None
    shuffle: int | None = None  # the seed
    bounds: tuple[int | None, int | None] | None = None
    max_rows: int | None = None  # max_samples: the first N rows of the selection
    shard: tuple[int, int] | None = None  # (I, N): this run's 1/N of the rows above, by content

    @property
    def narrows(self) -> bool:
        """Whether the run covers less than the whole dataset by these settings (not max_samples)."""
        return bool(self.where) or self.ids is not None or self.bounds is not None or self.shard is not None

    def keeps(self, row: dict[str, Any]) -> bool:
        for name, accepted in self.where.items():
            if name not in row or _text(row[name]) not in accepted:
                return False
        return self.ids is None or (self.id_field in row and _text(row[self.id_field]) in self.ids)


def from_settings(settings: dict[str, Any]) -> Selection:
    """The `dataset.*` selection keys (and max_samples), validated."""
    cfg = settings.get("dataset") or {}
    id_field = cfg.get("id_field") or "id"
    if not isinstance(id_field, str):
        raise ConfigError(f"dataset.id_field={id_field!r} must be a field name", "e.g. dataset.id_field=task_id")
    ids_file = cfg.get("ids_file")
    return Selection(where=_where(cfg.get("where")), ids=_ids(ids_file), id_field=id_field,
                     ids_file=str(ids_file) if ids_file else None, shuffle=_seed(cfg.get("shuffle")),
                     bounds=_bounds(cfg.get("slice")), max_rows=settings.get("max_samples"),
                     shard=_shard(cfg.get("shard")))


def _where(raw: Any) -> dict[str, frozenset[str]]:
    """`{field: value | [values]}` (dataset.where.topic=math) or `"field=value"` strings."""
    if raw is None:
        return {}
    items: list[tuple[Any, Any]] = []
    if isinstance(raw, dict):
        items = list(raw.items())
    else:
        for text in [raw] if isinstance(raw, str) else list(raw):
            if not isinstance(text, str) or "=" not in text or not text.split("=", 1)[0].strip():
                raise ConfigError(f"dataset.where entry {text!r} is not field=value",
                                  "write dataset.where.FIELD=VALUE (or a list of values), e.g. dataset.where.topic=math")
            name, value = text.split("=", 1)
            items.append((name.strip(), value))
    out: dict[str, frozenset[str]] = {}
    for name, value in items:
        values = value if isinstance(value, (list, tuple)) else [value]
        out[str(name)] = frozenset(out.get(str(name), frozenset()) | {_text(v) for v in values})
    return out


def _ids(path: Any) -> frozenset[str] | None:
    if not path:
        return None
    p = Path(str(path)).expanduser()
    if not p.is_file():
        raise ConfigError(f"dataset.ids_file: file not found: {p}",
                          "set dataset.ids_file to a text file with one id per line, or null")
    ids = frozenset(line.strip() for line in p.read_text(encoding="utf-8").splitlines() if line.strip())
    if not ids:
        raise ConfigError(f"dataset.ids_file {p} holds no ids", "write one id per line")
    return ids


def _seed(raw: Any) -> int | None:
    if raw is None or raw is False:
        return None
    if raw is True:
        return 0
    if isinstance(raw, int):
        return raw
    raise ConfigError(f"dataset.shuffle={raw!r} must be an integer seed, true (seed 0) or null",
                      "e.g. dataset.shuffle=1 (the same seed picks the same rows every time)")


def _bounds(raw: Any) -> tuple[int | None, int | None] | None:
    if raw is None or raw == "":
        return None
    parts = str(raw).split(":")
    if len(parts) != 2:
        raise ConfigError(f"dataset.slice={raw!r} is not START:STOP", SLICE_HINT)
    try:
        start, stop = (int(p) if p.strip() else None for p in parts)
    except ValueError as exc:
        raise ConfigError(f"dataset.slice={raw!r} has a bound that is not an integer", SLICE_HINT) from exc
    return start, stop


def _shard(raw: Any) -> tuple[int, int] | None:
    if raw is None or raw == "":
        return None
    parts = str(raw).split("/")
    try:
        index, count = (int(p) for p in parts) if len(parts) == 2 else (-1, 0)
    except ValueError:
        index, count = -1, 0
    if not 0 <= index < count:
        raise ConfigError(f"dataset.shard={str(raw)!r} is not I/N with 0 <= I < N", SHARD_HINT)
    return index, count


def shard_of(content: bytes, occurrence: int, count: int) -> int:
    """The shard (of `count`) a row belongs to: its canonical JSON and occurrence, nothing else."""
    digest = hashlib.blake2b(content + b"\x00%d" % occurrence, digest_size=8, person=b"hx-shard").digest()
    return int.from_bytes(digest, "big") % count


class Selected:
    """A Source seen through a Selection: yields only the rows `where`/`ids` keep, and notes each
    kept row's order value (content + occurrence + seed) for `cut`. Same Protocol as any Source."""

    def __init__(self, source: Source, selection: Selection) -> None:
        self.source = source
        self.selection = selection
        self.path, self.unit = source.path, source.unit
        self.order: dict[int, bytes] = {}
        self.in_shard: set[int] = set()  # with dataset.shard: the kept rows of this run's shard
        self.ids_seen: set[str] = set()
        self.fields_seen: set[str] = set()  # of the rows dropped: a `where` on a field no row has says so
        self.values_seen: dict[str, set[str]] = {}  # `where` field -> some of the values the rows have
        self.kept = self.dropped = 0

    def rows(self) -> Iterator[Record]:
        from hermes_exp.dataset.tasks import canonical_json

        seen: dict[bytes, int] = {}
        seed = str(self.selection.shuffle).encode()
        self.kept = self.dropped = 0
        for record in self.source.rows():
            if record.row is not None:
                if not self.selection.keeps(record.row):
                    self.dropped += 1
                    if len(self.fields_seen) < 200:
                        self.fields_seen.update(record.row)
                    for name in self.selection.where:
                        values = self.values_seen.setdefault(name, set())
                        if name in record.row and len(values) < 21:
                            values.add(_text(record.row[name]))
                    continue
                self.kept += 1
                if self.selection.ids is not None:
                    self.ids_seen.add(_text(record.row[self.selection.id_field]))
                if self.selection.shuffle is not None or self.selection.shard is not None:
                    content = canonical_json(record.row).encode()
                    occurrence = seen[content] = seen.get(content, -1) + 1
                    self._place(record.index, content, occurrence, seed)
            yield record

    def _place(self, index: int, content: bytes, occurrence: int, seed: bytes) -> None:
        """Note a kept row's shuffled order and whether it is in this run's shard."""
        if self.selection.shuffle is not None:
            self.order[index] = hashlib.blake2b(content + b"\x00%d" % occurrence, key=seed, digest_size=8).digest()
        shard = self.selection.shard
        if shard is not None and shard_of(content, occurrence, shard[1]) == shard[0]:
            self.in_shard.add(index)


def scan_selected(source: Source, selection: Selection, identity: str, skip_invalid: bool, **more: Any) -> Any:
    """`dataset.scan` over the selected rows: validated and keyed exactly as without a selection,
    then ordered and cut; refuses a selection that picks nothing."""
    from hermes_exp.dataset.tasks import scan

    selected = Selected(source, selection)
    try:
        found = scan(selected, identity, skip_invalid, None, **more)
    except DatasetError:
        if selected.kept or not selected.dropped:
            raise
        absent = sorted(set(selected.selection.where) - selected.fields_seen)
        why = f"; no row has the field{'s' if len(absent) > 1 else ''} {', '.join(map(repr, absent))} (the rows' " \
              f"fields: {', '.join(sorted(selected.fields_seen)[:20])})" if absent else "".join(
              f"; the rows' values of {name}: {_some(values)}" for name, values in selected.values_seen.items() if values)
        raise DatasetError(f"the selection keeps none of the {selected.dropped} valid rows of {source.path} "
                           f"({_describe(selected.selection)}{why})", "check dataset.where / dataset.ids_file") from None
    found.indexed = cut(selected, found.indexed)
    found.source = source  # the dataset itself, not the selection's view of it
    if not found.indexed:
        raise DatasetError(f"the selection picks no rows of {source.path} ({_describe(selected.selection)})",
                           "check dataset.slice against the number of rows selected")
    return found


def _some(values: set[str]) -> str:
    listed = sorted(values)[:20]
    return ", ".join(map(repr, listed)) + (", ..." if len(values) > 20 else "")


def _describe(sel: Selection) -> str:
    parts = [f"where {name} in {sorted(values)}" for name, values in sel.where.items()]
    if sel.ids is not None:
        parts.append(f"{len(sel.ids)} ids of {sel.ids_file} by {sel.id_field}")
    if sel.bounds is not None:
        parts.append("slice " + ":".join("" if b is None else str(b) for b in sel.bounds))
    if sel.shard is not None:
        parts.append(f"shard {sel.shard[0]}/{sel.shard[1]}")
    return ", ".join(parts) or "everything"


def cut(selected: Selected, indexed: Sequence[tuple]) -> list:
    """The scanned tasks (row index first in each entry), in the selection's order and bounds; every
    entry of one row (its samples) stays together."""
    sel = selected.selection
    _warn_missing_ids(selected)
    if sel.shuffle is None and sel.bounds is None and sel.max_rows is None and sel.shard is None:
        return indexed  # nothing to reorder or cut: the scan as it is (packed, not copied into a list)
    rows = list(dict.fromkeys(entry[0] for entry in indexed))
    if sel.shuffle is not None:
        rows.sort(key=lambda index: selected.order[index])
    if sel.bounds is not None:
        rows = rows[slice(*sel.bounds)]
    if sel.max_rows is not None:
        rows = rows[:sel.max_rows]
    if sel.shard is not None:  # 1/N of the rows selected above: the shards together are the unsharded run
        rows = [index for index in rows if index in selected.in_shard]
    position = {index: n for n, index in enumerate(rows)}
    kept = [entry for entry in indexed if entry[0] in position]
    kept = sorted(kept, key=lambda entry: position[entry[0]]) if sel.shuffle is not None else kept
    return SlotList(kept) if isinstance(indexed, SlotList) else kept


def _warn_missing_ids(selected: Selected) -> None:
    sel = selected.selection
    if sel.ids is None:
        return
    missing = sorted(sel.ids - selected.ids_seen)
    if missing:
        log.warning("%d id(s) of %s are not the %s of any valid row of %s (e.g. %s)", len(missing), sel.ids_file,
                    sel.id_field, selected.path, ", ".join(missing[:5]))
