"""Atomic file output: write to a temp file beside the target, fsync, rename over it.

A kill at any moment leaves the old file or the new one, never a torn line; an unchanged file is
not touched (so a no-op resume leaves outputs byte-identical, timestamps included)."""

from __future__ import annotations

import filecmp
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from hermes_exp.settings.file_modes import file_mode


@contextmanager
def atomic_writer(path: Path, binary: bool = False) -> Iterator[IO[Any]]:
    """A text file (UTF-8), or with `binary` a bytes one (a Parquet writer's sink), that replaces `path`
    only when the block ends without an exception."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, file_mode(path.parent))  # mkstemp's 0600 would hide outputs from a team (unless the run is private)
    try:
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")) as fh:
            yield fh
            fh.flush()
            unchanged = path.exists() and filecmp.cmp(tmp, path, shallow=False)
            if not unchanged:  # the new content reaches the disk before it replaces the old
                os.fsync(fh.fileno())
        if unchanged:
            os.unlink(tmp)
        else:
            os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
