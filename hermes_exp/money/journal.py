"""What model calls in flight may have cost, on disk before a call is sent: so a kill -9 of the whole
run cannot make the next invocation forget money it spent.

The parent books every call of a run here (its threads directly, worker processes through its broker),
in a file of its own under `<run_dir>/spend/`: a call's worst case before it is sent, its real cost after.
The parent, the only writer of the ledger, folds what no recorded result accounts for into the ledger (a
call that never settled counts at its worst case) when a run starts and when it ends, then removes the
files. Workers keep no journal, so cluster nodes need not see the run directory."""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from hermes_exp.settings.file_modes import make_dir

DIRNAME = "spend"


class SpendJournal:
    """One process's journal for one invocation of a run; a disabled one (no directory) does nothing."""

    def __init__(self, directory: Path | None, invocation: int | None) -> None:
        self.directory = directory
        self.invocation = invocation
        self._fd: int | None = None
        self._path: Path | None = None
        self._calls = 0
        self._lock = threading.Lock()

    @classmethod
    def for_run(cls, settings: dict[str, Any]) -> SpendJournal:
        invocation = settings.get("invocation") or {}
        run_dir = Path(settings.get("run_dir") or "")
        enabled = (settings.get("budget") or {}).get("max_cost_usd") is not None and run_dir.is_dir()
        return cls(run_dir / DIRNAME if enabled and invocation.get("id") is not None else None, invocation.get("id"))

    def reserve(self, key: str | None, worst: float) -> int | None:
        """Write down a call's worst case before it is sent; returns the entry to settle."""
        if self.directory is None or key is None:
            return None
        with self._lock:
            self._calls += 1
            call = self._calls
        self._write({"k": key, "i": self.invocation, "c": call, "w": worst})
        return call

    def settle(self, call: int | None, actual: float) -> None:
        if call is not None:
            self._write({"c": call, "a": actual})

    def _write(self, entry: dict[str, Any]) -> None:
        line = (json.dumps(entry, separators=(",", ":")) + "\n").encode()
        with self._lock:
            if self._fd is None:
                assert self.directory is not None
                make_dir(self.directory)
                self._path = self.directory / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
                self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.write(self._fd, line)  # one write of one line: what a kill leaves is whole lines

    def discard(self) -> None:
        """Close and remove this journal once the ledger accounts for every call in it (the parent's own
        calls, e.g. the summariser's, whose results it stored with their cost)."""
        with self._lock:
            self._close()
            if self._path is not None:
                self._path.unlink(missing_ok=True)

    def close(self) -> None:
        """Close and keep this journal (a broker's, once its workers are done): the parent folds it."""
        with self._lock:
            self._close()
            self.directory = None  # a call booked after this (none should be) is not written to a folded file

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def unaccounted(directory: Path) -> tuple[dict[tuple[str, int], float], list[Path]]:
    """(task key, invocation) -> what its journaled calls cost (unsettled ones at their worst case),
    and the files read. A torn last line (a kill mid-write) counts as nothing but its reservation."""
    totals: dict[tuple[str, int], float] = defaultdict(float)
    files = sorted(directory.glob("*.jsonl")) if directory.is_dir() else []
    for path in files:
        open_calls: dict[int, tuple[str, int, float]] = {}
        for raw in path.read_bytes().splitlines():
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if "w" in entry:
                open_calls[entry["c"]] = (entry["k"], entry["i"], float(entry["w"]))
            elif entry.get("c") in open_calls:
                key, invocation, _ = open_calls.pop(entry["c"])
                totals[(key, invocation)] += float(entry["a"])
        for key, invocation, worst in open_calls.values():
            totals[(key, invocation)] += worst
    return dict(totals), files


def fold_into(ledger: Any, run_dir: Path) -> float:
    """Add to the ledger what journaled calls cost beyond the results it recorded; remove the journal.
    Returns the amount added."""
    totals, files = unaccounted(run_dir / DIRNAME)
    if not totals and not files:
        return 0.0
    recorded = ledger.spend_invocations()
    added = 0.0
    for (key, invocation), usd in totals.items():
        if recorded.get(key) != invocation and usd > 0:  # no result of that dispatch was recorded
            ledger.add_spend(key, usd, invocation)
            added += usd
    for path in files:
        path.unlink(missing_ok=True)
    return added
