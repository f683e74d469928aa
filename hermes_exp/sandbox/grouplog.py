"""The reaper's records of running tool commands (reaper.py): one append-only file per process, a line
when a command starts ("+PID TICKS") and one when it has been reaped ("-PID"), instead of a file created
and removed per command and a read of /proc/PID/stat for its start time (~0.25 ms of every command).

Identity without the start time: TICKS is the clock (CLOCK_BOOTTIME, in /proc's clock ticks) read just
after the command was started, while it is still an unreaped child. No other live process can have had
its pid then, so a process that has that pid later is the command itself if it started no later than
TICKS, and one that reused the pid if it started after (its start is after the command was reaped):
the same tick-wide margin as comparing start times.

Each file is held under an exclusive flock by its process for as long as it writes it: a reaper leaves
the file of a live process in place (it still kills what the file names as running), and removes the
file of a process that has died (the lock went with it). A file past ROTATE_BYTES is replaced by a new
one holding only the running commands, written before the old one is removed."""

from __future__ import annotations

import atexit
import fcntl
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from pathlib import Path

PREFIX = "groups-"
ROTATE_BYTES = 64 << 10
TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")

_OPEN: "weakref.WeakSet[GroupLog]" = weakref.WeakSet()  # this process's logs, closed by close_all


def boot_ticks() -> int:
    """Now, in the clock and unit of /proc/PID/stat's start time (field 22)."""
    return time.clock_gettime_ns(time.CLOCK_BOOTTIME) // TICK_NS


class GroupLog:
    """This process's records in `where`; thread-safe. Opened at the first add."""

    def __init__(self, where: Path) -> None:
        self.dir = where
        self.path: Path | None = None
        self._fd = -1
        self._owner = 0  # the pid that opened the file: a forked child starts its own
        self._size = 0
        self._live: dict[int, int] = {}
        self._lock = threading.Lock()

    def add(self, pid: int) -> None:
        """Record a command just started (call it before the command can have been reaped)."""
        ticks = boot_ticks()
        with self._lock:
            self._append(f"+{pid} {ticks}\n")
            self._live[pid] = ticks

    def discard(self, pid: int) -> None:
        """The command was reaped (its pid may be reused from now on)."""
        with self._lock:
            if self._live.pop(pid, None) is not None:
                self._append(f"-{pid}\n")

    def close(self) -> None:
        """Remove the file when no recorded command runs (a later add opens a new one)."""
        with self._lock:
            if self._fd >= 0 and self._owner == os.getpid() and not self._live:
                self._drop()

    def _append(self, line: str) -> None:
        if self._owner != os.getpid():
            self._forget()  # first use, or a forked child: the parent's commands and file are not its own
        if self._fd < 0:
            self._open()
        elif self._size > ROTATE_BYTES or os.fstat(self._fd).st_nlink == 0:  # or removed under us
            self._rotate()
        self._size += os.write(self._fd, line.encode())

    def _forget(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # a parent's lock stays: it holds its own descriptor
        self._fd, self.path, self._live, self._owner = -1, None, {}, os.getpid()

    def _open(self) -> None:
        """A new file holding the running commands, locked."""
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}.log"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        self._fd, self.path = fd, path
        self._size = os.write(fd, "".join(f"+{pid} {t}\n" for pid, t in self._live.items()).encode())
        _OPEN.add(self)

    def _rotate(self) -> None:
        old_fd, old_path = self._fd, self.path
        self._open()  # the running commands are in the new file before the old one goes
        if old_path is not None:
            old_path.unlink(missing_ok=True)
        os.close(old_fd)

    def _drop(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)
        os.close(self._fd)
        self._fd, self.path = -1, None
        _OPEN.discard(self)


def close_all() -> None:
    """Close this process's logs that record nothing running, and remove their folders if that left them
    empty: at this process's exit (an executor worker exiting after its runner, whose watchdog found the
    logs still held and could not remove the folder)."""
    for log in list(_OPEN):
        try:
            log.close()
            log.dir.rmdir()
        except OSError:  # not empty, or gone: the next reap sees to it
            pass


def running(text: str) -> dict[int, int]:
    """The commands a log's text records as running: pid -> ticks. Only whole lines count: a line being
    written as the log is read, or cut short by a kill, is not read as a shorter pid or time."""
    live: dict[int, int] = {}
    for line in text.split("\n")[:-1]:
        if line.startswith("+"):
            pid, _, ticks = line[1:].partition(" ")
            if pid.isdigit() and ticks.isdigit():
                live[int(pid)] = int(ticks)
        elif line.startswith("-") and line[1:].isdigit():
            live.pop(int(line[1:]), None)
    return live


def reap_log(path: Path, kill: Callable[[int, int], bool]) -> int:
    """Kill what a log records as running (kill(pid, ticks) -> whether it killed); remove the log unless
    its process still holds it. Returns how many were killed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return 0
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = False
        except BlockingIOError:
            held = True  # its process runs: it keeps writing there
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        killed = sum(kill(pid, ticks) for pid, ticks in running(b"".join(chunks).decode("ascii", "replace")).items())
        if not held:
            path.unlink(missing_ok=True)
        return killed
    finally:
        os.close(fd)


atexit.register(close_all)
