"""`action=score`: apply the current verifier to every finished sample of a run, without running an
agent, then re-apply the filters and rewrite the outputs. Samples already scored by this verifier are
skipped (`resume.redo_all=true` scores them again); `command` needs the workdir archives that
`verifier.keep_workdir=true` keeps, and restores each into a fresh sandbox of the same kind and image."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


from hermes_exp.run import rescore
from hermes_exp.errors import LedgerError
from hermes_exp.model.clients import model_endpoint
from hermes_exp.run.checks import Checked
from hermes_exp.run.dispatch import run_id_for, stop_workers
from hermes_exp.run.ledger_open import existing_ledger
from hermes_exp.run.summary import EXIT_OK, EXIT_TASK_ERRORS, summary
from hermes_exp.store import filters as filters_mod, refilter
from hermes_exp.store.export import export
from hermes_exp.store.ledger import Ledger
from hermes_exp.store.score_book import ScoreBook
from hermes_exp.verify.rows import with_verifiers
from hermes_exp.settings.instantiation import construct


def score_run(checked: Checked, on_locked: Callable[[], None] | None = None) -> int:
    run_dir = checked.prepared.run_dir
    if not (run_dir / "ledger.db").is_file():
        raise LedgerError(f"no ledger in {run_dir}", "check run_name=...; action=score works on an existing run")
    settings = with_verifiers(checked.settings)
    filters = filters_mod.build(settings.get("filters"))
    with existing_ledger(run_dir, checked.prepared.identity, settings, on_locked) as ledger:
        keys = rescore.finished_keys(ledger)
        if not (settings.get("resume") or {}).get("redo_all"):
            keys = list(rescore.unscored(ledger, keys, ScoreBook(ledger, settings)))
        counts = _score(settings, ledger, keys, filters) if keys else {}
        refilter.reapply(ledger, settings)  # new scores: every sample judged again by these filters
        stats = export(ledger, run_dir, settings, checked.formats, checked.selection)
    rescore.report(counts, "action=score") if counts else print(
        "action=score: every finished sample already has a score from this verifier "
        "(resume.redo_all=true scores them again)", file=sys.stderr)
    summary(run_dir, stats, 0, interrupted=False, settings=settings)
    return EXIT_TASK_ERRORS if stats["failed"] else EXIT_OK


def _score(settings: dict[str, Any], ledger: Ledger, keys: list[str], filters: list[Any]) -> Any:
    run_id = run_id_for(ledger.path.parent)
    executor = construct(settings["executor"], "executor")
    with model_endpoint(settings) as base_url:
        invocation = {**settings["invocation"], "base_url": base_url, "run_id": run_id, "spent_usd": ledger.spent_usd()}
        scoped = {**settings, "invocation": invocation}
        try:
            return rescore.reverify(executor, scoped, ledger, rescore.rows_of(ledger, keys), filters)
        finally:
            stop_workers(run_id, grace=float((settings.get("resume") or {}).get("grace_seconds", 10)))
