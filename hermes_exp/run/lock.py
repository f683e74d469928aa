"""One invocation per run directory at a time: an exclusive flock, released by the OS on any exit, and a
heartbeat in the lock file for what a flock cannot see. The ledger (SQLite, WAL) is written by one host
only: on a network filesystem a flock may not reach other hosts, so the holder rewrites `pid host beat`
in `.lock` every HEARTBEAT_SECONDS, and an invocation on another host that sees the beat move refuses."""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import threading
import time
from pathlib import Path

from hermes_exp.errors import LedgerError
from hermes_exp.settings.file_modes import file_mode, make_dir

log = logging.getLogger(__name__)
HEARTBEAT_SECONDS = 1.0
STALE_BEATS = 4  # a holder on another host whose beat did not move for this many beats is gone
WIDTH = 128  # the lock file's one line, padded: rewritten in place, never torn into two holders


class RunLock:
    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / ".lock"
        self._fd: int | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self.earlier = False  # whether an earlier invocation ran here (the lock file existed)

    def __enter__(self) -> "RunLock":
        make_dir(self.path.parent)
        self.earlier = self.path.exists()
        _refuse_another_host(self.path)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, file_mode(self.path.parent))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            pid, host, _ = _holder(self.path)
            raise LedgerError(
                f"run directory {self.path.parent} is in use by another hermes-exp process (pid {pid}) on host "
                f"{host}", "wait for it to finish, stop it, or choose another run_name=...") from None
        self._fd = fd
        _write(fd, 0)
        self._beat = threading.Thread(target=self._beating, name="hermes-exp-run-lock", daemon=True)
        self._beat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is None:
            return
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        os.ftruncate(self._fd, 0)  # released: another host need not wait for a beat to stop
        os.close(self._fd)
        self._fd = None

    def _beating(self) -> None:
        beat = 0
        while not self._stop.wait(HEARTBEAT_SECONDS):
            beat += 1
            try:
                _write(self._fd, beat)
            except (OSError, TypeError):  # closed under us, or the disk is gone: the run reports that itself
                return


def _write(fd: int | None, beat: int) -> None:
    line = f"{os.getpid()} {socket.gethostname()} {beat}".ljust(WIDTH).encode()
    os.pwrite(fd, line, 0)
    os.fsync(fd)  # other hosts read it from the file server


def _holder(path: Path) -> tuple[str, str, str]:
    """(pid, host, beat) of the lock file's holder; empty strings when it holds none (released)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:  # opened anew: NFS close-to-open
            parts = fh.read(WIDTH).split()
    except FileNotFoundError:
        parts = []
    parts = parts + ["?"] * (3 - len(parts)) if parts else ["", "", ""]
    if len(parts) == 3 and parts[1] == "?":  # a lock file of hermes-exp before December 2026: its pid only
        parts[1] = socket.gethostname()
    return parts[0], parts[1], parts[2]


def _refuse_another_host(path: Path) -> None:
    """A holder on another host whose beat moves holds the run: refuse. One whose beat stopped (killed,
    or its host lost) left the file as it was: take the run over, saying so."""
    pid, host, beat = _holder(path)
    if not host or host == socket.gethostname():
        return  # released, or this host's: the flock decides
    deadline = time.monotonic() + STALE_BEATS * HEARTBEAT_SECONDS
    while time.monotonic() < deadline:
        time.sleep(HEARTBEAT_SECONDS / 4)
        now = _holder(path)
        if now[1] and now != (pid, host, beat):
            raise LedgerError(
                f"run directory {path.parent} is in use by hermes-exp pid {now[0]} on host {now[1]}: its ledger "
                "is written by one host at a time (SQLite's WAL does not work across hosts)",
                f"wait for it to finish or stop it on {now[1]}, or choose another run_name=... here (shards of "
                "one run: dataset.shard=I/N, each with its own run_name, joined by action=merge)")
        if not now[1]:
            return  # released meanwhile
    log.warning("run directory %s was held by pid %s on host %s, which stopped updating it %.0f s ago: taking "
                "it over", path.parent, pid, host, STALE_BEATS * HEARTBEAT_SECONDS)
