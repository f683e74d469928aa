"""`action=export` (and `action=compress`): re-apply the current filters to every finished task and
rewrite the outputs from the ledger, without a single model call."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

from hermes_exp import compress
from hermes_exp.errors import LedgerError
from hermes_exp.run import export_scope
from hermes_exp.run.checks import Checked
from hermes_exp.run.ledger_open import existing_ledger
from hermes_exp.run.summary import EXIT_OK, EXIT_TASK_ERRORS, say_outside, summary
from hermes_exp.store import refilter
from hermes_exp.store.export import export
from hermes_exp.verify.rows import with_verifiers


def reexport(checked: Checked, on_locked: Callable[[], None] | None = None) -> int:
    """action=export: re-apply the current filters to every finished task and rewrite the outputs,
    without a single model call. action=compress (or outputs.compress=true) also compresses the kept
    rows: only the summaries the ledger does not hold yet are asked for."""
    run_dir = checked.prepared.run_dir
    if not (run_dir / "ledger.db").is_file():
        raise LedgerError(f"no ledger in {run_dir}", "check run_name=...; action=export works on an existing run")
    settings = with_verifiers(checked.settings)
    with existing_ledger(run_dir, checked.prepared.identity, settings, on_locked) as ledger:
        settings = {**settings, "mcp_tools": json.loads(ledger.meta("mcp_tools") or "{}")}
        scope = export_scope.rescope(ledger, settings, checked)  # this invocation's dataset selection
        if scope is not None:
            say_outside(ledger, checked.samples, *scope)
        changed = refilter.reapply(ledger, settings, always=True)
        stats = export(ledger, run_dir, settings, checked.formats, checked.selection)
        squeezed = compress.compress(ledger, run_dir, settings) if compress.wanted(settings) else None
    print(f"re-applied filters: {changed} task(s) changed state", file=sys.stderr)
    summary(run_dir, stats, 0, interrupted=False, settings=settings)
    if squeezed is not None:
        print(compress.describe(squeezed, run_dir), file=sys.stderr)
        return EXIT_TASK_ERRORS if squeezed["summary_failed"] else EXIT_OK
    return EXIT_OK
