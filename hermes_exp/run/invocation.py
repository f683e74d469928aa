"""One run: check the settings, plan pending tasks, dispatch them, commit each result to the ledger, export."""

from __future__ import annotations

import functools
import json
import logging
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hermes_exp import compress
from hermes_exp.dataset.selection import scan_selected
from hermes_exp.dataset.tasks import Scan, changed_since
from hermes_exp.money import sweep_budget
from hermes_exp.money.journal import fold_into
from hermes_exp.run import pilot
from hermes_exp.run.checks import Checked, check_all
from hermes_exp.run.dispatch import dispatch
from hermes_exp.run.export_action import reexport
from hermes_exp.run.guard import RunGuard
from hermes_exp.run.ledger_open import open_ledger
from hermes_exp.run.lock import RunLock
from hermes_exp.run.plan import plan_invocation
from hermes_exp.run.signals import StopSignals
from hermes_exp.settings import file_modes, run_options
from hermes_exp.run.summary import EXIT_INTERRUPTED, EXIT_OK, exit_code, say_outside, summary
from hermes_exp.store import refilter
from hermes_exp.store.export import export
from hermes_exp.store.health import storage_error
from hermes_exp.store.ledger import Ledger
from hermes_exp.tools import mcp
from hermes_exp.verify.rows import row_checker

log = logging.getLogger(__name__)


def run(settings: dict[str, Any], on_locked: Callable[[], None] | None = None) -> int:
    """Run one experiment (or, with action=export, only re-filter and re-export); return the exit code.
    `on_locked` runs once an invocation that runs tasks holds the run directory and its ledger took this
    experiment (the CLI saves its config snapshot there: a refused invocation must not overwrite it)."""
    checked = check_all(settings)
    if file_modes.wanted(settings):  # before the lock, the ledger and any export: all are written owner-only
        file_modes.make_private(checked.prepared.run_dir)
    try:
        # The config snapshot describes the run that made the ledger's results: only an invocation that
        # runs tasks writes it (an export, a re-score or a compression leaves it as it is).
        if checked.action in ("export", "compress"):
            return reexport(checked)
        if checked.action == "merge":
            from hermes_exp.run.merge_action import merge_run

            return merge_run(checked)
        if checked.action == "score":
            from hermes_exp.run.score_action import score_run

            return score_run(checked)
        return _run(checked, on_locked or (lambda: None))
    except (OSError, sqlite3.Error) as exc:
        error = storage_error(exc, checked.prepared.run_dir)
        if error is None:
            raise
        raise error from exc


@dataclass
class _Done:
    """What the part of a run under the lock leaves for its end."""

    found: Scan
    settings: dict[str, Any]
    guard: RunGuard
    code: int
    stats: dict[str, Any]
    planned: int
    projection: Any
    squeezed: dict[str, Any] | None


def _run(checked: Checked, on_locked: Callable[[], None]) -> int:
    prepared = checked.prepared
    run_dir, settings = prepared.run_dir, prepared.verified
    if checked.settings.get("mcp_tools"):  # what discovery found (none when skipped)
        settings = {**settings, "mcp_tools": checked.settings["mcp_tools"]}
    run_dir.mkdir(parents=True, exist_ok=True)
    # The rows are spooled as they are keyed (an unlinked file: nothing is left behind by a kill), so
    # a dataset rewritten during the run cannot make a task run content other than its key's.
    check = prepared.cache.watching(row_checker(settings))
    with tempfile.TemporaryFile(dir=run_dir, prefix=".dataset-") as spool:
        scan = functools.partial(scan_selected, prepared.dataset, prepared.selection, prepared.identity,
                                 bool(settings["dataset"].get("skip_invalid")), samples=checked.samples,
                                 extra_check=check, spool=spool)
        found = prepared.cache.load(keys=False) or scan()  # a cached scan's keys are read only if the ledger needs them
        with RunLock(run_dir) as lock, StopSignals() as stop:
            ledger = open_ledger(run_dir, prepared.identity, settings, lock.earlier)
            try:
                on_locked()  # once the ledger took this experiment: a refused one never rewrites the snapshot
                done = _locked(checked, settings, ledger, found, scan, stop)
            finally:
                ledger.close()
            summary(run_dir, done.stats, done.planned, interrupted=done.code == EXIT_INTERRUPTED,
                    settings=done.settings)
    return _end(checked, done)


def _locked(checked: Checked, settings: dict[str, Any], ledger: Ledger, found: Scan, scan: Callable[[], Scan],
            stop: StopSignals) -> _Done:
    """Plan under the run lock, dispatch, then export (and compress) from the ledger."""
    prepared, k, run_dir = checked.prepared, checked.pilot, checked.prepared.run_dir
    refiltered = refilter.reapply(ledger, settings)  # this invocation's filters, never an earlier one's
    if refiltered:
        print(f"re-applied filters: {refiltered} task(s) changed state", file=sys.stderr)
    found, (todo, again, chosen, gone, total) = plan_invocation(ledger, prepared.cache, found, scan,
                                                                prepared.selection, checked.intent, k)
    settings = _with_tools(checked, settings, ledger, bool(todo or again))
    say_outside(ledger, checked.samples, gone, bool(prepared.selection.narrows or prepared.selection.max_rows))
    if settings.get("mcp_tools"):  # for action=export, which starts no server
        ledger.set_meta({"mcp_tools": json.dumps(settings["mcp_tools"], sort_keys=True)})
    fold_into(ledger, run_dir)  # what a killed invocation's calls in flight cost
    guard = RunGuard(settings, ledger.spent_usd())
    _start_sweep_budget(settings, guard.spent)
    # a pilot's progress counts its own tasks: the others did not "finish earlier"
    code = dispatch(settings, ledger, found, todo, len(chosen) if k else total, guard, stop, again,
                    "pilot tasks" if k else "tasks of this run")
    refilter.settled(ledger, settings)  # the tasks judged now used the same filters
    stats = export(ledger, run_dir, _may_shrink(settings) if refiltered else settings, checked.formats,
                   checked.selection)
    projection = pilot.projection(ledger, chosen, total, int(settings["num_workers"]),
                                  run_options.preflight(settings) == "oracle") if k else None
    squeezed = compress.compress(ledger, run_dir, settings) if compress.wanted(settings) and \
        code == EXIT_OK else None
    return _Done(found, settings, guard, code, stats, len(todo), projection, squeezed)


def _with_tools(checked: Checked, settings: dict[str, Any], ledger: Ledger, work: bool) -> dict[str, Any]:
    """The settings with the MCP servers' tools. A run that looked settled at start-up skipped listing
    them: found work (another invocation changed that) lists them now, and checks the toolsets; else the
    export knows the tools the ledger kept."""
    if not checked.deferred:
        return settings
    if work:
        late = checked.with_toolsets().settings.get("mcp_tools")
        return {**settings, "mcp_tools": late} if late else settings
    if mcp.server_specs(settings):
        return {**settings, "mcp_tools": json.loads(ledger.meta("mcp_tools") or "{}")}
    return settings


def _end(checked: Checked, done: _Done) -> int:
    """What a run says after its lock is released, and its exit code."""
    run_dir, dataset = checked.prepared.run_dir, checked.prepared.dataset
    if done.squeezed is not None:
        print(compress.describe(done.squeezed, run_dir), file=sys.stderr)
    if changed_since(dataset, done.found):
        log.warning("the dataset %s changed while this run used it: its tasks ran the rows as they were when "
                    "the run started; run the same command again to run rows that are new or changed",
                    dataset.path)
    done.guard.check()  # budget reached or authentication failing: say so and exit non-zero
    if checked.pilot and done.code == EXIT_OK:
        pilot.report(run_dir, done.projection)
        return EXIT_OK  # a pilot only measures: its failed tasks are retried by the full run
    return exit_code(done.code, done.stats)


def _may_shrink(settings: dict[str, Any]) -> dict[str, Any]:
    """Filters this invocation changed re-export on purpose: fewer trajectories are what was asked for."""
    return {**settings, "outputs": {**(settings.get("outputs") or {}), "allow_shrink": True}}


def _start_sweep_budget(settings: dict[str, Any], spent: float) -> None:
    """Book this job in the sweep's budget file (its spend so far; no reservations left by a crash)."""
    shared = sweep_budget.shared(settings)
    if shared is not None:
        shared.start(spent)
