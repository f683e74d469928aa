"""`action=score`: apply the current verifier to every finished sample of a run, without running an
agent, then re-apply the filters and rewrite the outputs. Samples already scored by this verifier are
skipped (`resume.redo_all=true` scores them again; `score.only=suspect` verifies only the verifier_suspect
ones again); `command` needs the workdir archives that `verifier.keep_workdir=true` keeps (and every
suspect or failed verification keeps), and restores each into a fresh sandbox of the same kind and image."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any


from hermes_exp.run import rescore
from hermes_exp.errors import LedgerError
from hermes_exp.model.clients import model_endpoint
from hermes_exp.money import broker as budget_broker
from hermes_exp.money.budget import BudgetLimits
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
        finished = rescore.finished_keys(ledger)
        book = ScoreBook(ledger, settings)
        keys = _chosen(settings, ledger, finished, book)
        counts = _score(settings, ledger, keys, filters) if keys else rescore.Tally()
        rescore.report(counts, "action=score")
        if not counts and getattr(counts, "why", None):  # nothing could run: outputs and verdicts stay as they were
            return EXIT_TASK_ERRORS
        refilter.reapply(ledger, settings)  # new scores: every sample judged again by these filters
        stats = export(ledger, run_dir, settings, checked.formats, checked.selection)
        if not keys:
            print(f"action=score: {_nothing_to_score(settings, ledger, finished, book)}", file=sys.stderr)
    summary(run_dir, stats, 0, interrupted=False, settings=settings)
    return EXIT_TASK_ERRORS if stats["failed"] or counts.why else EXIT_OK


def _chosen(settings: dict[str, Any], ledger: Ledger, finished: list[str], book: ScoreBook) -> list[str]:
    """The samples to verify: all with resume.redo_all, else the suspect ones (score.only=suspect), else
    those without a usable score from the verifier this config gives them."""
    if (settings.get("resume") or {}).get("redo_all"):
        return finished
    if (settings.get("score") or {}).get("only") == "suspect":
        return list(rescore.suspect(ledger, finished, book))
    return list(rescore.unscored(ledger, finished, book))


def _nothing_to_score(settings: dict[str, Any], ledger: Ledger, finished: list[str], book: ScoreBook) -> str:
    """Why no sample was scored: none has a verifier under this config, or each already has its score."""
    if (settings.get("score") or {}).get("only") == "suspect":
        return ("no finished sample is verifier_suspect under this verifier (score.only=suspect): nothing to "
                "verify again")
    if not any(book.get(row["key"], (json.loads(row["result"] or "{}")).get("row") or {}) is not None
               for row in rescore.rows_of(ledger, finished)):
        return ("no finished sample has a verifier under this config (verifier=none, and no row names one): "
                "nothing to score; choose one, e.g. verifier=answer (or command, checks, judge)")
    return "every finished sample already has a score from this verifier (resume.redo_all=true scores them again)"


def _score(settings: dict[str, Any], ledger: Ledger, keys: list[str], filters: list[Any]) -> Any:
    run_id = run_id_for(ledger.path.parent)
    executor = construct(settings["executor"], "executor")
    with model_endpoint(settings) as base_url:
        invocation = {**settings["invocation"], "base_url": base_url, "run_id": run_id, "spent_usd": ledger.spent_usd()}
        limit = BudgetLimits.from_settings(settings).max_cost_usd  # a judge's calls: one budget for every worker
        scoped, broker = budget_broker.serve({**settings, "invocation": invocation}, executor.broker_bind(), limit)
        try:
            return rescore.reverify(executor, scoped, ledger, rescore.rows_of(ledger, keys), filters)
        finally:
            stop_workers(run_id, grace=float((settings.get("resume") or {}).get("grace_seconds", 10)))
            if broker is not None:
                broker.close()
