"""Whether a run directory's ledger can be trusted, and what to say when the disk or the ledger fails.

A damaged or missing ledger must never be mistaken for a new run: that would start over and then
overwrite the outputs the old ledger exported."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

from hermes_exp.errors import LedgerError, StorageError

EXPORTED = ("trajectories.jsonl", "statistics.json")


def check_ledger_file(path: Path, earlier: bool) -> None:
    """Refuse a ledger file that SQLite would silently treat as a new, empty database, and a run
    directory whose outputs were exported by a ledger that is gone. `earlier`: an earlier invocation
    ran in this directory, so it wrote the ledger's header (an empty file is then a truncated one,
    not one that a reader's `sqlite3.connect` created before the first run)."""
    run_dir = path.parent
    outputs = [name for name in EXPORTED if (run_dir / name).is_file()]
    if path.is_file() and path.stat().st_size == 0 and (earlier or outputs):
        raise LedgerError(
            f"the ledger {path} is empty (0 bytes): it was truncated, so this run's record of finished tasks "
            "is lost" + (f" (its outputs {', '.join(outputs)} are still there)" if outputs else ""),
            f"restore {path.name} from a backup; or move it away (mv {path} {path}.empty) together with the "
            "outputs to start this run directory afresh; or choose another run_name=...")
    if not path.exists() and outputs:
        raise LedgerError(
            f"{run_dir} holds outputs ({', '.join(outputs)}) but no ledger.db: starting afresh here would "
            "overwrite them with a smaller export",
            f"restore {path.name} from a backup; or move the outputs away (or delete them) to start this "
            "run directory afresh; or choose another run_name=...")


def damaged(path: Path, exc: sqlite3.DatabaseError) -> LedgerError:
    """The message for a ledger SQLite cannot read (garbage, a text file, a torn copy)."""
    return LedgerError(
        f"the ledger {path} is not a usable SQLite database ({exc}): it was damaged or replaced",
        f"restore {path.name} (with its {path.name}-wal beside it) from a backup; or move it away "
        f"(mv {path} {path}.damaged) with the outputs to start afresh; or choose another run_name=...")


def is_disk_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return isinstance(exc, sqlite3.OperationalError) and "disk is full" in str(exc)


def storage_error(exc: BaseException, run_dir: Path | None) -> StorageError | None:
    """A clear message for a full disk or a damaged ledger met mid-run; None for other errors."""
    where = f" ({run_dir})" if run_dir else ""
    if is_disk_full(exc):
        name = getattr(exc, "filename", None)
        return StorageError(
            f"no space left on the device while writing {name or 'the run directory' + where}: {exc}. "
            "Tasks committed before this are safe in the ledger",
            "free some space (or choose a run directory on a disk with room, e.g. hydra.run.dir=...) and "
            "run the same command again: it resumes")
    if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
        return StorageError(
            f"the ledger{where} became unreadable during the run ({exc}): it was damaged or replaced",
            "restore ledger.db from a backup, or move it away with the outputs to start afresh")
    return None
