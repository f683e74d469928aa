"""The sweep budget's book: one append-only file per process and job generation in `<sweep dir>/sweep_budget/`,
read by every other process before it books a call. No file is written by two processes and nothing is
locked, so it works where a sweep's jobs share only a network filesystem (NFS, Lustre, GPFS), on which
SQLite's WAL and cross-host locks do not.

A file is named `<job tag>.g<generation>.<host>.<pid>.<nonce>.jsonl`. A job's (re)start opens a new
generation whose first record carries what the job spent so far; the files of older generations are then
history (their reservations void, their spend inside the new start's figure). Records are one JSON line
each: `{"job"...}` (the file's header), `{"start": usd}`, `{"r": usd}` (a reservation), `{"s": usd, "a":
usd}` (a reservation released and what the call cost). A line is read only once its newline is there."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from hermes_exp.errors import ConfigError

FOLDER = "sweep_budget"
LEGACY = "sweep_budget.db"  # the book of hermes-exp before December 2026 (SQLite, WAL): read, never written


def job_tag(job: str) -> str:
    return hashlib.blake2b(job.encode(), digest_size=6).hexdigest()


@dataclass
class _File:
    """What one process's file said so far (read incrementally: files only grow)."""

    tag: str
    generation: int
    offset: int = 0
    start: float | None = None
    settled: float = 0.0
    reserved: float = 0.0

    def take(self, data: bytes) -> None:
        for line in data.splitlines():
            record = json.loads(line)
            if "start" in record:
                self.start = float(record["start"])
            self.reserved += float(record.get("r", 0.0)) - float(record.get("s", 0.0))
            self.settled += float(record.get("a", 0.0))


@dataclass(frozen=True)
class Totals:
    spent: float
    reserved: float
    jobs: int
    generations: dict[str, int]  # job tag -> its newest generation


class Book:
    """The sweep directory's book as this process reads it: `totals()` over every job's newest generation."""

    def __init__(self, sweep_dir: Path) -> None:
        self.folder = Path(sweep_dir) / FOLDER
        self.folder.mkdir(parents=True, exist_ok=True)
        self.legacy = _legacy(Path(sweep_dir))
        self._files: dict[str, _File] = {}

    def totals(self) -> Totals:
        newest: dict[str, int] = {}
        for name in os.listdir(self.folder):
            known = self._files.get(name) or self._add(name)
            if known is not None:
                newest[known.tag] = max(newest.get(known.tag, -1), known.generation)
        spent = reserved = 0.0
        for name, file in self._files.items():
            if newest.get(file.tag) == file.generation:
                self._read(name, file)
                spent += (file.start or 0.0) + file.settled
                reserved += max(0.0, file.reserved)
        started = {f.tag for f in self._files.values() if f.start is not None and newest.get(f.tag) == f.generation}
        spent += sum(usd for tag, usd in self.legacy.items() if tag not in started)
        return Totals(spent, reserved, len(set(newest) | set(self.legacy)), newest)

    def job_spent(self, tag: str) -> float:
        """What the job's newest generation booked as spent (the legacy book's figure when it has none)."""
        generation = self.totals().generations.get(tag)
        mine = [f for f in self._files.values() if f.tag == tag and f.generation == generation]
        if not any(f.start is not None for f in mine):
            return self.legacy.get(tag, 0.0) + sum(f.settled for f in mine)
        return sum((f.start or 0.0) + f.settled for f in mine)

    def _add(self, name: str) -> _File | None:
        parts = name.split(".")
        if len(parts) < 6 or not parts[-1] == "jsonl" or not parts[1][1:].isdigit():
            return None  # not a book file (an editor's backup, a temp file): not ours to read
        self._files[name] = _File(parts[0], int(parts[1][1:]))
        return self._files[name]

    def _read(self, name: str, file: _File) -> None:
        # opened anew each time: on NFS, close-to-open consistency shows what other hosts closed or synced
        with open(self.folder / name, "rb") as fh:
            fh.seek(file.offset)
            data = fh.read()
        end = data.rfind(b"\n") + 1  # a line still being written is read next time
        file.take(data[:end])
        file.offset += end


class Writer:
    """This process's file for one job generation: each record appended and synced before it counts."""

    def __init__(self, book: Book, job: str, generation: int) -> None:
        self.generation = generation
        name = f"{job_tag(job)}.g{generation}.{socket.gethostname().replace('.', '_')}.{os.getpid()}." \
               f"{os.urandom(4).hex()}.jsonl"
        self.path = book.folder / name
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.append({"job": job, "host": socket.gethostname(), "pid": os.getpid()})

    def append(self, record: dict[str, object]) -> None:
        os.write(self._fd, json.dumps(record, separators=(",", ":")).encode() + b"\n")
        os.fsync(self._fd)  # seen by the next read of any host before this call goes on


def _legacy(sweep_dir: Path) -> dict[str, float]:
    """Job tag -> spent, from a sweep budget file of an earlier hermes-exp (its reservations are void:
    no job of this version books there)."""
    path = sweep_dir / LEGACY
    if not path.is_file():
        return {}
    try:
        with sqlite3.connect(path, timeout=30) as db:
            rows = db.execute("SELECT job, spent FROM jobs").fetchall()
    except sqlite3.Error as exc:
        raise ConfigError(f"the sweep's budget file {path} (of an earlier hermes-exp) cannot be read: {exc}",
                          f"let the sweep's other jobs finish, or move {path} aside if its spend need not count") \
            from exc
    return {job_tag(job_name(Path(job), sweep_dir)): float(spent or 0.0) for job, spent in rows}


def job_name(run_dir: Path, sweep_dir: Path) -> str:
    """A job's name in the book: its run directory relative to the sweep's ('.' for a single run), the same
    on every host whatever the filesystem's mount point (the old book named jobs by absolute path)."""
    return "." if run_dir == sweep_dir.resolve() else run_dir.name
