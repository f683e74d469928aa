"""One invocation per run directory at a time: an exclusive flock, released by the OS on any exit."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from hermes_exp.errors import LedgerError
from hermes_exp.settings.file_modes import file_mode, make_dir


class RunLock:
    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / ".lock"
        self._fd: int | None = None
        self.earlier = False  # whether an earlier invocation ran here (the lock file existed)

    def __enter__(self) -> "RunLock":
        make_dir(self.path.parent)
        self.earlier = self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, file_mode(self.path.parent))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise LedgerError(
                f"run directory {self.path.parent} is in use by another hermes-exp process (pid {holder})",
                "wait for it to finish, stop it, or choose another run_name=...") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
