"""The run's ledger, opened under the run lock: claimed by this experiment (an earlier one archived when
`resume.new_identity` asks), refused when it is damaged or belongs to another experiment."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hermes_exp.errors import LedgerError
from hermes_exp.run.lock import RunLock
from hermes_exp.settings.file_modes import make_dir
from hermes_exp.settings.resolved import stored_identity
from hermes_exp.store.health import check_ledger_file
from hermes_exp.store.ledger import Ledger

# Everything that describes the experiment in the ledger: it goes with that ledger (compression's metrics,
# a pilot's projection and the report too, or they would stand beside the new experiment's outputs).
OUTPUT_GLOBS = ("ledger.db*", "trajectories.*", "batch_*.jsonl", "statistics.json", "passed.jsonl",
                "failed.jsonl", "archives", ".export-index", "compression_metrics.json", "pilot.json", "report.html")


def open_ledger(run_dir: Path, identity: str, settings: dict[str, Any], earlier: bool) -> Ledger:
    """Open the run's ledger, refusing another experiment unless resume.new_identity archives it, and
    refusing a ledger that is gone or empty while the outputs it exported are still there."""
    check_ledger_file(run_dir / "ledger.db", earlier)
    ledger = Ledger(run_dir / "ledger.db")
    try:
        ledger.claim_identity(identity, stored_identity(settings))
        return ledger
    except LedgerError:
        old = ledger.meta("identity") or "unknown"
        ledger.close()
        if not (settings.get("resume") or {}).get("new_identity"):
            raise
    _archive(run_dir, old)
    ledger = Ledger(run_dir / "ledger.db")
    ledger.claim_identity(identity, stored_identity(settings))
    return ledger


def _archive(run_dir: Path, old: str) -> None:
    """Move the previous experiment's ledger and outputs aside (resume.new_identity=true)."""
    archive = run_dir / "archive" / f"{time.strftime('%Y%m%d-%H%M%S')}-{old.split(':')[-1]}"
    make_dir(archive)
    for pattern in OUTPUT_GLOBS:
        for path in run_dir.glob(pattern):
            shutil.move(str(path), archive / path.name)
    print(f"archived the previous experiment of {run_dir} to {archive}", file=sys.stderr)


@contextmanager
def existing_ledger(run_dir: Path, identity: str, settings: dict[str, Any],
                    on_locked: Callable[[], None] | None) -> Iterator[Ledger]:
    """The ledger of an existing run, held under the run lock (actions that work on finished runs):
    refused when it is damaged or belongs to another experiment."""
    with RunLock(run_dir) as lock:
        if on_locked:
            on_locked()
        check_ledger_file(run_dir / "ledger.db", lock.earlier)
        ledger = Ledger(run_dir / "ledger.db")
        try:
            ledger.claim_identity(identity, stored_identity(settings))
            yield ledger
        finally:
            ledger.close()
