"""One run: plan pending tasks, dispatch them, commit each result to the ledger, export."""

from __future__ import annotations

import functools
import gc
import hashlib
import json
import logging
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


from hermes_exp import compress
from hermes_exp.run import export_scope
from hermes_exp.run import pilot
from hermes_exp.settings import run_options
from hermes_exp.settings import secrets as secret_guard
from hermes_exp.money import sweep_budget
from hermes_exp.dataset.tasks import Scan, Slot, Task, changed_since, stream_tasks
from hermes_exp.errors import ConfigError, LedgerError
from hermes_exp.run.guard import RunGuard
from hermes_exp.run.plan import intent, plan_invocation, samples_per_prompt
from hermes_exp.run.prepare import Prepared
from hermes_exp.settings.redact import Redactor, secret_names
from hermes_exp.run.lock import RunLock
from hermes_exp.sandbox import options as sandbox_options
from hermes_exp.sandbox.reaper import Watchdog
from hermes_exp.sandbox.auto import runs_on_host
from hermes_exp.dataset.selection import scan_selected
from hermes_exp.money.journal import fold_into
from hermes_exp.settings.resolved import check_basics, check_toolsets, identity_hash, stored_identity
from hermes_exp.run.signals import StopSignals
from hermes_exp.store import filters as filters_mod, refilter
from hermes_exp.store.export import export
from hermes_exp.store.formats import chosen_formats
from hermes_exp.store.health import check_ledger_file, storage_error
from hermes_exp.store.ledger import Ledger
from hermes_exp.store.rows import ledger_row
from hermes_exp.store.samples import selection_mode
from hermes_exp.store import score_record as record
from hermes_exp.store.metrics import summary_line
from hermes_exp.verify.rows import row_checker, with_verifiers
from hermes_exp.tools import mcp
from hermes_exp.settings.instantiation import construct

log = logging.getLogger(__name__)
EXIT_OK, EXIT_TASK_ERRORS, EXIT_INTERRUPTED = 0, 3, 130
ACTIONS = ("run", "export", "compress", "score")
OUTPUT_GLOBS = ("ledger.db*", "trajectories.jsonl", "batch_*.jsonl", "statistics.json", "passed.jsonl",
                "failed.jsonl", "archives", ".export-index")


@contextmanager
def model_endpoint(settings: dict[str, Any]) -> Iterator[str]:
    """The base URL to call: the model's, else the provider's, else a mock server started for the run."""
    from hermes_exp.model.clients import endpoint

    model = settings["model"]
    url = endpoint(model, settings["provider"], None)  # the rule every client's endpoint follows
    if url:
        yield url
        return
    from hermes_exp.mock.server import MockServer

    with MockServer(**(model.get("mock_server") or {})) as server:
        yield server.base_url


def run(settings: dict[str, Any], on_locked: Callable[[], None] | None = None) -> int:
    """Run one experiment (or, with action=export, only re-filter and re-export); return the exit code.
    `on_locked` runs once an invocation that runs tasks holds the run directory and its ledger took this
    experiment (the CLI saves its config snapshot there: a refused invocation must not overwrite it)."""
    secret_guard.check_settings(settings)  # a key typed into a config file: refused before it is saved
    check_basics(settings)
    run_dir = Path(settings["run_dir"]).resolve()
    prepared = Prepared(settings, run_dir)
    # Every toolset's tools are built, and every MCP server started to list its tools, only when this
    # invocation may run something: a settled run's no-op skips both (prepare.py); should its plan find
    # work after all, they are made before it runs.
    unchecked = settings.get("action", "run") == "run" and prepared.settled()
    if settings.get("action", "run") != "export" and not unchecked:
        settings = mcp.with_discovered(settings)  # MCP servers' tools, listed once, before anything else
    if not unchecked:
        check_toolsets(settings)
    sandbox_options.check(settings.get("sandbox"))  # before the run directory is claimed by this config
    run_options.check(settings)  # resume.redo_all=no is a string bool() takes for true
    chosen_formats(settings)  # a typo in outputs.formats must not surface after hours of work
    compress.check(settings)
    selection_mode(settings)
    filters_mod.warn_if_nothing_verifies(settings)
    action = settings.get("action", "run")
    if action not in ACTIONS:
        raise ConfigError(f"action={action!r} is not an action", f"choose one of: {', '.join(ACTIONS)}")
    try:
        # The config snapshot describes the run that made the ledger's results: only an invocation that
        # runs tasks writes it (an export, a re-score or a compression leaves it as it is).
        if action in ("export", "compress"):
            return reexport(settings, run_dir, identity_hash(settings), None)
        if action == "score":
            from hermes_exp.run.score_action import score_run

            return score_run(settings, run_dir, identity_hash(settings), None)
        return _run(settings.get("mcp_tools"), prepared, on_locked or (lambda: None),
                    _late_checks if unchecked else None)
    except (OSError, sqlite3.Error) as exc:
        error = storage_error(exc, run_dir)
        if error is None:
            raise
        raise error from exc


def _late_checks(settings: dict[str, Any]) -> dict[str, Any]:
    """The start-up work a run that looked settled skipped, made once its plan found work after all."""
    settings = mcp.with_discovered(settings)
    check_toolsets(settings)
    return settings


def _run(mcp_tools: dict[str, Any] | None, prepared: Prepared, on_locked: Callable[[], None],
         unchecked: Callable[[dict[str, Any]], dict[str, Any]] | None) -> int:
    """`mcp_tools`: what discovery found (none when skipped); `unchecked`: the start-up work skipped
    because the run looked settled, made if it has work (it returns the settings with the MCP tools)."""
    run_dir, identity, dataset = prepared.run_dir, prepared.identity, prepared.dataset
    selection, k, settings = prepared.selection, prepared.pilot, prepared.verified
    wanted = intent(prepared.settings)
    if mcp_tools:
        settings = {**settings, "mcp_tools": mcp_tools}
    run_dir.mkdir(parents=True, exist_ok=True)
    # The rows are spooled as they are keyed (an unlinked file: nothing is left behind by a kill), so
    # a dataset rewritten during the run cannot make a task run content other than its key's.
    cache = prepared.cache
    check = cache.watching(row_checker(settings))
    with tempfile.TemporaryFile(dir=run_dir, prefix=".dataset-") as spool:
        scan = functools.partial(scan_selected, dataset, selection, identity, bool(settings["dataset"].get("skip_invalid")),
                                 samples=samples_per_prompt(settings), extra_check=check, spool=spool)
        found = cache.load(keys=False) or scan()  # a cached scan's keys are read only if the ledger needs them
        with RunLock(run_dir) as lock, StopSignals() as stop:
            ledger = _open_ledger(run_dir, identity, settings, lock.earlier)
            try:
                on_locked()  # once the ledger took this experiment: a refused one never rewrites the snapshot
                refiltered = refilter.reapply(ledger, settings)  # this invocation's filters, never an earlier one's
                if refiltered:
                    print(f"re-applied filters: {refiltered} task(s) changed state", file=sys.stderr)
                found, (todo, again, chosen, gone, total) = plan_invocation(ledger, cache, found, scan, selection,
                                                                            wanted, k)
                if unchecked and (todo or again):
                    settings = unchecked(settings)  # it looked settled at start-up; another invocation changed that
                elif unchecked and mcp.server_specs(settings):  # settled: the export knows the tools the ledger kept
                    settings = {**settings, "mcp_tools": json.loads(ledger.meta("mcp_tools") or "{}")}
                _say_outside(ledger, settings, gone, bool(selection.narrows or selection.max_rows))
                if settings.get("mcp_tools"):  # for action=export, which starts no server
                    ledger.set_meta({"mcp_tools": json.dumps(settings["mcp_tools"], sort_keys=True)})
                fold_into(ledger, run_dir)  # what a killed invocation's calls in flight cost
                guard = RunGuard(settings, ledger.spent_usd())
                _start_sweep_budget(settings, guard.spent)
                # a pilot's progress counts its own tasks: the others did not "finish earlier"
                code = _dispatch(settings, ledger, found, todo, len(chosen) if k else total, guard, stop, again,
                                 "pilot tasks" if k else "tasks of this run")
                refilter.settled(ledger, settings)  # the tasks judged now used the same filters
                stats = export(ledger, run_dir, _may_shrink(settings) if refiltered else settings)
                if k:
                    proj = pilot.projection(ledger, chosen, total, int(settings["num_workers"]))
                squeezed = compress.compress(ledger, run_dir, settings) if compress.wanted(settings) and \
                    code == EXIT_OK else None
            finally:
                ledger.close()
            _summary(run_dir, stats, len(todo), interrupted=code == EXIT_INTERRUPTED, settings=settings)
    if squeezed is not None:
        print(compress.describe(squeezed, run_dir), file=sys.stderr)
    if changed_since(dataset, found):
        log.warning("the dataset %s changed while this run used it: its tasks ran the rows as they were when "
                    "the run started; run the same command again to run rows that are new or changed",
                    dataset.path)
    guard.check()  # budget reached or authentication failing: say so and exit non-zero
    if k and code == EXIT_OK:
        pilot.report(run_dir, proj)
        return EXIT_OK  # a pilot only measures: its failed tasks are retried by the full run
    return code if code != EXIT_OK or not stats["failed"] else EXIT_TASK_ERRORS


def _say_outside(ledger: Ledger, settings: dict[str, Any], gone: int, narrowed: bool) -> None:
    """Why tasks of the ledger are left out: samples beyond samples_per_prompt, the invocation's narrower
    dataset selection, or rows that are no longer in the dataset."""
    samples = samples_per_prompt(settings)
    beyond = min(gone, ledger.db.execute("SELECT COUNT(*) FROM tasks WHERE sample >= ?", [samples]).fetchone()[0])
    where = ("outside this invocation's dataset selection (dataset.slice, where, ids_file, max_samples) or no "
             "longer in the dataset") if narrowed else "no longer in the dataset (rows edited or removed)"
    for n, why in ((gone - beyond, where), (beyond, f"samples beyond samples_per_prompt={samples}")):
        if n:
            print(f"{n} task(s) in the ledger are {why}: kept in the ledger, left out of the outputs and "
                  "statistics", file=sys.stderr)


def _may_shrink(settings: dict[str, Any]) -> dict[str, Any]:
    """Filters this invocation changed re-export on purpose: fewer trajectories are what was asked for."""
    return {**settings, "outputs": {**(settings.get("outputs") or {}), "allow_shrink": True}}


def _start_sweep_budget(settings: dict[str, Any], spent: float) -> None:
    """Book this job in the sweep's budget file (its spend so far; no reservations left by a crash)."""
    shared = sweep_budget.shared(settings)
    if shared is not None:
        shared.start(spent)


def _open_ledger(run_dir: Path, identity: str, settings: dict[str, Any], earlier: bool) -> Ledger:
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
    archive = run_dir / "archive" / f"{time.strftime('%Y%m%d-%H%M%S')}-{old.split(':')[-1]}"
    archive.mkdir(parents=True)
    for pattern in OUTPUT_GLOBS:
        for path in run_dir.glob(pattern):
            shutil.move(str(path), archive / path.name)
    print(f"archived the previous experiment of {run_dir} to {archive}", file=sys.stderr)
    ledger = Ledger(run_dir / "ledger.db")
    ledger.claim_identity(identity, stored_identity(settings))
    return ledger


def _dispatch(settings: dict[str, Any], ledger: Ledger, found: Scan, todo: list[Slot], total: int,
              guard: RunGuard, stop: StopSignals, again: set[str] = frozenset(), unit: str = "tasks of this run") -> int:
    """Run the agent on `todo`, then verify `again` (failed verifications) without the agent."""
    if not todo and not again:
        print(f"nothing to run: all {total} {unit} are settled", file=sys.stderr)
        return EXIT_OK
    # What only a run with work needs is imported here: a settled run's invocation starts without it.
    from hermes_exp.run import rescore
    from hermes_exp.worker import task as worker
    from hermes_exp.model.probe import probe
    from hermes_exp.run.progress import Progress

    run_id = run_id_for(ledger.path.parent)
    filters = filters_mod.build(settings.get("filters"))
    executor = construct(settings["executor"], "executor")
    label = str(Path(settings["run_name"]) / _job_name(ledger.path.parent, settings["run_name"]))
    progress = Progress(total=len(todo), already=total - len(todo), label=label, spent_before=guard.spent)
    redact = Redactor.from_env(settings)
    invocation = ledger.start_invocation()
    ran = calls = 0
    interrupted = False
    with model_endpoint(settings) as base_url, Watchdog(run_id):
        settings = {**settings, "invocation": {**settings.get("invocation", {}), "base_url": base_url,
                                               "run_id": run_id, "spent_usd": guard.spent, "id": invocation,
                                               "parent_pid": os.getpid()}}
        try:
            probe(base_url)
            _preflight(settings, found.images, own_images=bool(getattr(found.source, "own_images", False)))
            # What exists now (imports, config, the runtime: most of the heap) lives for the whole dispatch:
            # left out of the cyclic collector's full passes, which walked all of it several times a run.
            gc.freeze()
            tasks = guard.gate(_marked(ledger, found, todo))
            for result in executor.map_unordered(worker.run_task, settings, tasks):
                if not guard.observe(result, ledger):  # cancelled, or stopped by the budget: stays pending
                    continue
                taken = record.take(result, redact)
                row = _redacted(ledger_row(result, filters, taken.score), redact)
                ledger.record(row, int(settings["batch_size"]))
                record.save(ledger, ledger.path.parent, row["key"], taken)
                ran, calls = ran + 1, calls + row["api_calls"]
                progress.verdict(taken.score)
                progress.task_cost(row["spent_usd"])  # before update: a log line shows the projection
                progress.note(**guard.note(row, result.limiter))  # first: a line printed now includes this task
                progress.update(row["state"])
            if again and not guard.stopped:
                rescore.report(rescore.reverify(executor, settings, ledger, rescore.rows_of(ledger, sorted(again)),
                                                filters), "failed verifications retried")
        except KeyboardInterrupt:
            interrupted = True
        finally:
            gc.unfreeze()  # collectable again once the run is over (a sweep's next job, the export)
            stop.shield()  # a second Ctrl-C from here on only skips the grace period
            progress.close()
            _stop_workers(run_id, float((settings.get("resume") or {}).get("grace_seconds", 10)), stop.hurry)
            fold_into(ledger, ledger.path.parent)  # calls of tasks whose results never came back
            ledger.finish_invocation(invocation, ran, calls)
    return EXIT_INTERRUPTED if interrupted else EXIT_OK


def _redacted(row: dict[str, Any], redact: Redactor) -> dict[str, Any]:
    """The ledger is written only here: no secret value gets in, whatever a worker returned."""
    if redact:
        row.update({k: redact(row[k]) for k in ("error", "result") if row.get(k)})
    return row


def run_id_for(run_dir: Path) -> str:
    """The run's sandbox label (containers, task dirs): derived from its directory."""
    return "hx-" + hashlib.blake2b(str(run_dir).encode(), digest_size=6).hexdigest()


def _job_name(run_dir: Path, run_name: str) -> str:
    """A sweep job's own part of its directory (its override values); empty for a single run."""
    return "" if run_dir.name == run_name else run_dir.name


def _preflight(settings: dict[str, Any], images: set[str], own_images: bool = False) -> None:
    """Checks that fail the whole run before any task starts (engine down, bubblewrap missing).
    `own_images`: every row brings its container (Harbor tasks), so sandbox.image is not warmed."""
    from hermes_exp.worker import task as worker
    from hermes_exp.tools.readiness import drawable

    runtime = worker.runtime_for(settings)
    drawable(settings, runtime.registry, warn=True)  # toolsets the demo leaves out: said once all checks passed
    factory = runtime.sandboxes
    factory.preflight(images, default_image=not own_images)
    if Redactor.from_env(settings) and runs_on_host(factory):
        log.warning("sandbox=%s runs tool commands as host processes of your user: a command can read "
                    "the API key ($%s) from any process of yours that holds it (your shell included, "
                    "through /proc/<pid>/environ or /proc/<pid>/mem). Use sandbox=bwrap or sandbox=docker "
                    "with a real key.", settings["sandbox"].get("kind"), ", $".join(secret_names(settings)))
    if images and settings["sandbox"].get("kind") != "docker":
        log.warning("%d dataset row image(s) (e.g. %s) are ignored: sandbox=%s runs no containers; "
                    "use sandbox=docker to run those rows in their images", len(images), sorted(images)[0],
                    settings["sandbox"].get("kind"))


def _marked(ledger: Ledger, found: Scan, todo: list[Slot]) -> Iterator[Task]:
    from hermes_exp.worker import task as worker

    for task in stream_tasks(found, todo):
        if worker.CANCEL.is_set():
            return
        ledger.mark_running(task.key, task.index, task.row["prompt"], task.sample)
        yield task


def _stop_workers(run_id: str, grace: float, hurry: threading.Event | None = None) -> None:
    """Let conversations in flight end at their next turn (unless told to hurry), then close whatever
    sandbox is left."""
    from hermes_exp.worker import task as worker

    if worker.in_flight():
        worker.CANCEL.set()
        deadline = time.monotonic() + grace
        while worker.in_flight() and time.monotonic() < deadline and not (hurry or threading.Event()).wait(0.05):
            pass
    worker.release(run_id)
    worker.CANCEL.clear()


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


def reexport(settings: dict[str, Any], run_dir: Path, identity: str, on_locked: Callable[[], None] | None) -> int:
    """action=export: re-apply the current filters to every finished task and rewrite the outputs,
    without a single model call. action=compress (or outputs.compress=true) also compresses the kept
    rows: only the summaries the ledger does not hold yet are asked for."""
    if not (run_dir / "ledger.db").is_file():
        raise LedgerError(f"no ledger in {run_dir}", "check run_name=...; action=export works on an existing run")
    settings = with_verifiers(settings)
    with existing_ledger(run_dir, identity, settings, on_locked) as ledger:
        settings = {**settings, "mcp_tools": json.loads(ledger.meta("mcp_tools") or "{}")}
        scope = export_scope.rescope(ledger, settings, run_dir)  # this invocation's dataset selection
        if scope is not None:
            _say_outside(ledger, settings, *scope)
        changed = refilter.reapply(ledger, settings, always=True)
        stats = export(ledger, run_dir, settings)
        squeezed = compress.compress(ledger, run_dir, settings) if compress.wanted(settings) else None
    print(f"re-applied filters: {changed} task(s) changed state", file=sys.stderr)
    _summary(run_dir, stats, 0, interrupted=False, settings=settings)
    if squeezed is not None:
        print(compress.describe(squeezed, run_dir), file=sys.stderr)
        return EXIT_TASK_ERRORS if squeezed["summary_failed"] else EXIT_OK
    return EXIT_OK


def _summary(run_dir: Path, stats: dict[str, Any], ran: int, interrupted: bool,
             settings: dict[str, Any] | None = None) -> None:
    why = lambda counts: f" ({', '.join(f'{k}: {v}' for k, v in counts.items())})" if counts else ""  # noqa: E731
    samples = int(stats.get("samples_per_prompt") or 1)
    of = f"{stats['total_prompts']} prompts" if samples == 1 else \
        f"{stats['total_prompts']} tasks ({stats['total_prompts'] // samples} prompts x {samples} samples)"
    files = stats.get("exported") or {}
    written = ", ".join(f"{name}: {n}" for name, n in files.items() if name != "trajectories.jsonl")
    print(
        f"\n{stats['kept']} kept, {stats['filtered']} filtered{why(stats['discarded'])}, "
        f"{stats['failed']} failed{why(stats['errors'])}, {stats['pending']} pending "
        f"of {of} ({ran} planned now, {stats['api_calls']} model calls in all)\n"
        + (f"  by {refilter.describe(settings)}\n" if settings is not None else "")
        + f"  trajectories: {run_dir / 'trajectories.jsonl'}"
        + (f" ({files['trajectories.jsonl']} lines)" if "trajectories.jsonl" in files else "") + "\n"
        + (f"  also:         {written}\n" if written else "")
        + f"  statistics:   {run_dir / 'statistics.json'}\n"
        f"  ledger:       {run_dir / 'ledger.db'}", file=sys.stderr)
    if stats.get("verification"):
        print(summary_line(stats["verification"]), file=sys.stderr)
    if interrupted:
        print("interrupted: finished tasks are saved. To resume, run the same command again:\n  "
              + " ".join(["hermes-exp", *sys.argv[1:]]), file=sys.stderr)
    elif stats["failed"]:
        classes = ",".join(sorted(stats["errors"]))
        print(f"  some tasks failed ({classes}); the same command again retries the classes in "
              f"resume.retry_errors (default provider,sandbox); to retry all: resume.retry_errors=[{classes}]",
              file=sys.stderr)
