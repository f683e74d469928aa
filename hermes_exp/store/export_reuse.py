"""The export's index (`.export-index` in the run dir): per task, a digest of the ledger columns its
lines were made from, where its ShareGPT, OpenAI and ATIF lines sit in the files that export wrote, the score
they show and the task's statistics facts; then the settings the lines depend on and the identity
(size, mtime, ctime, inode) of every file it points into. The next export copies the bytes of a task
whose inputs did not change instead of rendering them again, but only while each file is the one the
index describes: any other (edited, moved, truncated, written by an export killed before its index)
and the export renders everything. Read in dataset order beside the ledger (memory flat in run size)."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from hermes_exp.settings.file_modes import file_mode

INDEX = ".export-index"
FORMAT = 2  # 2: each task's ATIF record too
LINE_FILES = ("", "trajectories.jsonl", "passed.jsonl", "failed.jsonl")  # 0: the line is in none
OPENAI_FILE = "trajectories.openai.jsonl"
# key digest, version digest, prompt_index, line file, offset, length, openai offset, length (-1: none),
# atif offset, length (-1: none), reward given, reward, passed (-1: None), facts length
_RECORD = struct.Struct("<16s16sqBqqqqqqBdbI")
_TAIL = struct.Struct("<Q")


class Stale(Exception):
    """A line the index points at is not there: the export starts again, rendering every line."""


def digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def version(row: dict[str, Any]) -> bytes:
    """What of a task row its lines and facts are made from: every write of a result sets updated_at
    (ledger.record, set_state, set_outcome, reindex), the rest is read into the lines directly."""
    return digest(repr((row["updated_at"], row["finished_at"], row["prompt_index"], row["batch_num"],
                        row.get("sample"), row.get("tools_hash"), row["key"])))


def identity(path: Path) -> list[int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


@dataclass
class Entry:
    version: bytes
    prompt_index: int
    line: tuple[int, int, int]  # (file number in LINE_FILES, offset, length)
    openai: tuple[int, int]  # (offset, length); length -1: none
    atif: tuple[int, int]  # (offset, length) in the ATIF file; length -1: none
    shown: tuple[float | None, bool | None]  # the reward and passed the lines show
    facts: dict[str, Any]
    raw: bytes  # the facts as the index keeps them (copied to the next index as they are)


class Previous:
    """The last export's index, read forward in dataset order: `find(prompt_index, key)` (both streams
    are ordered by prompt_index, key), `read(...)` the bytes of a line it points at."""

    def __init__(self, run_dir: Path, fh: IO[bytes], end: int, tail: dict[str, Any]) -> None:
        self.run_dir, self.tail, self._fh, self._end = run_dir, tail, fh, end
        self._fds = {name: os.open(run_dir / name, os.O_RDONLY) for name, ident in tail["files"].items() if ident}
        self._pi: int | None = None
        self._group: dict[bytes, Entry] = {}
        self._next = self._read()

    @classmethod
    def open(cls, run_dir: Path, settings_key: str) -> Previous | None:
        """The index, when it was written with these settings and every file it describes is still the
        one it describes; else None."""
        try:
            fh = (run_dir / INDEX).open("rb")
        except FileNotFoundError:
            return None
        try:
            fh.seek(-_TAIL.size, os.SEEK_END)
            length, = _TAIL.unpack(fh.read(_TAIL.size))
            end = fh.seek(-_TAIL.size - length, os.SEEK_END)
            tail = json.loads(fh.read(length))
            fh.seek(0)
            if tail.get("format") == FORMAT and tail.get("settings") == settings_key and all(
                    identity(run_dir / name) == ident for name, ident in tail["files"].items() if ident):
                return cls(run_dir, fh, end, tail)
        except (OSError, ValueError, KeyError, TypeError, struct.error):
            pass
        fh.close()
        return None

    def rewind(self) -> None:
        self._fh.seek(0)
        self._pi, self._group, self._next = None, {}, self._read()

    def close(self) -> None:
        self._fh.close()
        for fd in self._fds.values():
            os.close(fd)
        self._fds = {}

    def lines(self, name: str) -> int | None:
        """How many lines the index's export wrote to `name`."""
        return self.tail["lines"].get(name)

    def batch_kept(self, name: str, lines: int) -> bool:
        """Whether batch file `name` is still the one the index's export left, with `lines` lines."""
        found = self.tail["batches"].get(name)
        return found is not None and found[0] == lines and identity(self.run_dir / name) == found[1]

    def find(self, prompt_index: int, key: str) -> Entry | None:
        if prompt_index != self._pi:
            self._group = {}
            while self._next is not None and self._next[1].prompt_index < prompt_index:
                self._next = self._read()
            while self._next is not None and self._next[1].prompt_index == prompt_index:
                self._group[self._next[0]] = self._next[1]
                self._next = self._read()
            self._pi = prompt_index
        return self._group.get(digest(key))

    def read(self, name: str, offset: int, length: int) -> bytes:
        fd = self._fds.get(name)
        data = os.pread(fd, length, offset) if fd is not None else b""
        if len(data) != length or not data.endswith(b"\n"):
            raise Stale(f"{name}: no line of {length} bytes at {offset}")
        return data

    def _read(self) -> tuple[bytes, Entry] | None:
        if self._fh.tell() >= self._end:
            return None
        head = self._fh.read(_RECORD.size)
        key, ver, pi, lf, lo, ll, oo, ol, ao, al, given, reward, passed, size = _RECORD.unpack(head)
        raw = self._fh.read(size)
        return key, Entry(ver, pi, (lf, lo, ll), (oo, ol), (ao, al),
                          (reward if given else None, None if passed < 0 else bool(passed)), json.loads(raw), raw)


class Recorder:
    """The next index, written beside the outputs as they are written and renamed into place only after
    them (`commit`): a kill in between leaves the old index, whose files then no longer match."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        fd, self._tmp = tempfile.mkstemp(prefix=f"{INDEX}.", suffix=".tmp", dir=run_dir)
        os.fchmod(fd, file_mode(run_dir))
        self._fh = os.fdopen(fd, "wb")

    def add(self, key: str, ver: bytes, prompt_index: int, line: tuple[int, int, int], openai: tuple[int, int],
            atif: tuple[int, int], shown: tuple[float | None, bool | None], facts: dict[str, Any] | bytes) -> None:
        body = facts if isinstance(facts, bytes) else json.dumps(facts, ensure_ascii=False).encode()
        reward, passed = shown
        self._fh.write(_RECORD.pack(digest(key), ver, prompt_index, *line, *openai, *atif, reward is not None,
                                    reward or 0.0, -1 if passed is None else int(passed), len(body)))
        self._fh.write(body)

    def commit(self, settings_key: str, files: dict[str, int | None], batches: dict[str, int]) -> None:
        """`files`: the line files written and their lines (None: not written by this export)."""
        tail = {"format": FORMAT, "settings": settings_key,
                "files": {name: identity(self.run_dir / name) if n is not None else None for name, n in files.items()},
                "lines": {name: n for name, n in files.items() if n is not None},
                "batches": {name: [n, identity(self.run_dir / name)] for name, n in batches.items()}}
        body = json.dumps(tail).encode()
        self._fh.write(body + _TAIL.pack(len(body)))
        self._fh.close()
        os.replace(self._tmp, self.run_dir / INDEX)

    def abort(self) -> None:
        self._fh.close()
        if os.path.exists(self._tmp):
            os.unlink(self._tmp)


def settings_key(parts: list[Any], known_tools: list[str], settings: dict[str, Any]) -> str:
    """Everything besides the row and its score that a line shows: the export's settings (the export
    stamp's), the run's known tools (tool_stats' keys) and its MCP tools."""
    return json.dumps([parts, known_tools, settings.get("mcp_tools") or {}], sort_keys=True, default=str)
