"""The last scan's task keys, kept in `<run_dir>/.scan-cache`, so an invocation over an unchanged dataset
file plans without re-reading and re-hashing every row (a settled 100k run: most of a no-op).

Served only when the file's signature (device, inode, size, mtime in ns) and everything the keys depend
on (the settings, the selection's ids file) are what the cached scan saw, and the file was last
modified at least `RACY_NS` before that scan started: a write within the same timestamp tick as the
scan could otherwise leave the signature unchanged (git's "racily clean" rule). The cache only ever
says "these are the keys"; whenever planning finds work to do, the run scans the file for real."""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from hermes_exp.dataset.tasks import KEY_SCHEME, RowCheck, Scan, Slot, path_signature
from hermes_exp.dataset.readers import Source
from hermes_exp.dataset.selection import Selection
from hermes_exp.dataset.slots import SlotList
from hermes_exp.store.atomic import atomic_writer
from hermes_exp.verify.rows import FILE_FIELDS

NAME = ".scan-cache"
SCHEME = f"scan-cache-1/{KEY_SCHEME}"
RACY_NS = 2_000_000_000


def file_signature(path: Any) -> list[int] | None:
    """[device, inode, size, mtime_ns] of a regular file, else None (folders, hub names: not cached)."""
    signature = path_signature(path)
    return list(signature[:4]) if signature and signature[4] else None


def cache_key(settings: dict[str, Any], selection: Selection) -> str | None:
    """What the keys of a scan depend on besides the file; None when a scan must not be cached (an ids
    file selection: its scan warns about ids it does not find)."""
    if selection.ids is not None:
        return None
    text = json.dumps({"settings": settings, "scheme": SCHEME}, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


class ScanCache:
    """One run directory's cached scan: `load` it, or `save` a full scan (with when it started)."""

    def __init__(self, run_dir: Path, source: Source, key: str | None) -> None:
        self.path = run_dir / NAME
        self.source = source
        self.key = key
        self.started_ns = time.time_ns()  # before the scan reads the file
        self.signature = file_signature(source.path) if key else None
        self.external = False  # a row named folders (files/tests): its validity depends on more than the file

    def watching(self, check: RowCheck | None) -> Callable[[dict[str, Any]], str | None]:
        """`check` (a scan's extra row check), noting whether any row names folders."""
        def watched(row: dict[str, Any]) -> str | None:
            if not self.external and any(isinstance(row.get(name), str) for name in FILE_FIELDS):
                self.external = True
            return check(row) if check is not None else None
        return watched

    def _header(self) -> tuple[dict[str, Any], bytes] | None:
        """The cache file's header (and its line) when it describes this exact file and settings."""
        if self.signature is None or not self.path.is_file():
            return None
        try:
            with self.path.open("rb") as fh:
                line = fh.readline()
            header = json.loads(line)
            if (header.get("scheme"), header.get("key"), header.get("signature")) != (SCHEME, self.key, self.signature):
                return None
            if self.signature[3] > int(header["scanned_ns"]) - RACY_NS:
                return None
            set(header["images"])
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None
        return header, line

    def identity(self) -> str | None:
        """What names the cached scan (its header: settings, file signature, when it was scanned), when it
        may serve; None otherwise. Every scan saved gets another one."""
        found = self._header()
        return hashlib.blake2b(found[1], digest_size=16).hexdigest() if found else None

    def load(self, keys: bool = True) -> Scan | None:
        """The cached scan of this exact file and settings, without a spool; None on any doubt. Without
        `keys`, only what the header says (images, the file's stamp): a settled run needs no more."""
        found = self._header()
        if found is None:
            return None
        header, line = found
        slots: SlotList = SlotList()
        if keys:
            try:
                with self.path.open("rb") as fh:
                    if fh.readline() != line:
                        return None
                    slots = SlotList(json.loads(fh.readline()))
            except (OSError, ValueError, TypeError):
                return None
        return Scan(slots, set(header["images"]), stamp=_stamp(self.signature), source=self.source)

    def save(self, found: Scan) -> None:
        """Keep a full scan's keys for the next invocation, when the scan may be replayed: every row was
        valid, no row named folders whose later removal would make it invalid, the file did not change."""
        replayable = not found.problems and not self.external
        if self.signature is None or not replayable or file_signature(self.source.path) != self.signature:
            self.path.unlink(missing_ok=True)
            return
        header = {"scheme": SCHEME, "key": self.key, "signature": self.signature, "scanned_ns": self.started_ns,
                  "images": sorted(found.images)}
        try:
            with atomic_writer(self.path) as out:
                out.write(json.dumps(header) + "\n")
                _write_slots(out, found.indexed)
        except OSError:
            self.path.unlink(missing_ok=True)  # only a cache: the run goes on without it


def _write_slots(out: Any, slots: Iterable[Slot], chunk: int = 4096) -> None:
    """The slots as one JSON line, a list of [index, key, sample] (exactly json.dumps of the whole list),
    written a few thousand at a time: no list of lists and no string of them all is made."""
    out.write("[")
    batch: list[list[Any]] = []
    first = True
    for slot in itertools.chain(slots, [None]):
        if slot is not None:
            batch.append(list(slot))
            if len(batch) < chunk:
                continue
        if batch:
            out.write(("" if first else ",") + json.dumps(batch, separators=(",", ":"))[1:-1])
            first, batch = False, []
    out.write("]\n")


def _stamp(signature: list[int]) -> tuple[int, int, int]:
    """dataset.source_stamp's (inode, size, mtime_ns) from a file signature."""
    return signature[1], signature[2], signature[3]
