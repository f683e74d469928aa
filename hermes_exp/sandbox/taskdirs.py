"""Per-task host directories, shared by the local and bwrap backends: named after the run so a
killed run's leftovers (and only those) are found, and tracked while open so shutdown closes them."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import uuid
import weakref
from pathlib import Path
from typing import Protocol

from hermes_exp.errors import SandboxError


class Closable(Protocol):
    closed: bool

    def close(self) -> None: ...


class TaskDirs:
    def __init__(self, root: str | None, run_id: str | None, keep: bool) -> None:
        self.root = root
        self.keep = keep
        # Without a run id, a unique one: the reaper must never match another run's directories.
        self.run_id = re.sub(r"[^A-Za-z0-9_.-]", "_", run_id or f"hx-{uuid.uuid4().hex[:12]}")[:40]
        # open boxes, held by their sessions: one a session let go of (closed) leaves on its own, so
        # opening is O(1) however many sessions run (it rebuilt the set of them on every open)
        self._live: weakref.WeakSet[Closable] = weakref.WeakSet()
        self._lock = threading.Lock()

    @property
    def parent(self) -> Path:
        return Path(self.root or tempfile.gettempdir())

    def make(self, task_key: str) -> Path:
        """A fresh directory for one task: <run id>-<key prefix>-<random>."""
        if self.root:
            os.makedirs(self.root, exist_ok=True)
        key = re.sub(r"[^A-Za-z0-9]", "", task_key.split(":")[-1])[:12] or "task"
        try:
            return Path(tempfile.mkdtemp(prefix=f"{self.run_id}-{key}-", dir=self.root))
        except OSError as exc:
            raise SandboxError(f"cannot create a sandbox directory under {self.parent}: {exc}",
                               "set sandbox.root to a writable directory with free space") from exc

    def leftovers(self, parent: Path | None = None) -> list[Path]:
        """This run's entries under `parent`: exactly the names make() creates, nothing else."""
        where = parent or self.parent
        name = re.compile(re.escape(self.run_id) + r"-[A-Za-z0-9]{1,12}-[A-Za-z0-9_]{8}")
        return [p for p in (where.iterdir() if where.is_dir() else []) if name.fullmatch(p.name)]

    def reap(self) -> None:
        """Remove what a killed earlier invocation of this run left behind."""
        if not self.keep:
            for leftover in self.leftovers():
                shutil.rmtree(leftover, ignore_errors=True)

    def track(self, box: Closable) -> None:
        with self._lock:
            self._live.add(box)

    def close_all(self) -> None:
        """At the end of a run: close every sandbox still open here (tasks cut short by an interrupt),
        then remove this run's directories that other processes left (a processes/dask executor's
        workers, killed on Ctrl-C before they could clean up). Safe to call twice."""
        with self._lock:
            live, self._live = list(self._live), weakref.WeakSet()
        for box in live:
            if not box.closed:
                box.close()
        self.reap()
