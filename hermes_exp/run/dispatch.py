"""The dispatch, in the parent alone: hand the pending tasks to the executor, commit each result to the
ledger as it comes back, re-verify failed verifications, and close whatever the workers left open."""

from __future__ import annotations

import gc
import hashlib
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_exp.dataset.tasks import Scan, Slot, Task, stream_tasks
from hermes_exp.model.clients import model_endpoint
from hermes_exp.money import broker as budget_broker
from hermes_exp.money.journal import fold_into
from hermes_exp.run.guard import RunGuard
from hermes_exp.run.signals import StopSignals
from hermes_exp.run.summary import EXIT_INTERRUPTED, EXIT_OK
from hermes_exp.sandbox.auto import runs_on_host
from hermes_exp.sandbox.reaper import Watchdog
from hermes_exp.settings.instantiation import construct
from hermes_exp.settings.redact import Redactor, secret_names
from hermes_exp.store import filters as filters_mod
from hermes_exp.store import score_record as record
from hermes_exp.store.ledger import Ledger
from hermes_exp.store.rows import ledger_row

log = logging.getLogger(__name__)


def dispatch(settings: dict[str, Any], ledger: Ledger, found: Scan, todo: list[Slot], total: int,
             guard: RunGuard, stop: StopSignals, again: set[str] = frozenset(), unit: str = "tasks of this run") -> int:
    """Run the agent on `todo`, then verify `again` (failed verifications) without the agent."""
    if not todo and not again:
        print(f"nothing to run: all {total} {unit} are settled", file=sys.stderr)
        return EXIT_OK
    # What only a run with work needs is imported here: a settled run's invocation starts without it.
    from hermes_exp.run.progress import Progress

    run_id = run_id_for(ledger.path.parent)
    filters = filters_mod.build(settings.get("filters"))
    executor = construct(settings["executor"], "executor")
    label = str(Path(settings["run_name"]) / _job_name(ledger.path.parent, settings["run_name"]))
    progress = Progress(total=len(todo), already=total - len(todo), label=label, spent_before=guard.spent)
    loop = _Loop(ledger, guard, progress, executor, filters, Redactor.from_env(settings))
    invocation = ledger.start_invocation()
    interrupted = False
    with model_endpoint(settings) as base_url, Watchdog(run_id):
        settings = {**settings, "invocation": {**settings.get("invocation", {}), "base_url": base_url,
                                               "run_id": run_id, "spent_usd": guard.spent, "id": invocation,
                                               "parent_pid": os.getpid()}}
        settings, broker = budget_broker.serve(settings, executor.broker_bind(), guard.limit)
        try:
            loop.run(settings, found, todo, again)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            gc.unfreeze()  # collectable again once the run is over (a sweep's next job, the export)
            stop.shield()  # a second Ctrl-C from here on only skips the grace period
            progress.close()
            stop_workers(run_id, float((settings.get("resume") or {}).get("grace_seconds", 10)), stop.hurry)
            if broker is not None:  # after the workers' last calls; its journal is folded next
                broker.close()
            fold_into(ledger, ledger.path.parent)  # calls of tasks whose results never came back
            ledger.finish_invocation(invocation, loop.ran, loop.calls)
    return EXIT_INTERRUPTED if interrupted else EXIT_OK


@dataclass
class _Loop:
    """The dispatch loop and what it counts (tasks committed, their model calls)."""

    ledger: Ledger
    guard: RunGuard
    progress: Any
    executor: Any
    filters: list[Any]
    redact: Redactor
    ran: int = 0
    calls: int = 0

    def run(self, settings: dict[str, Any], found: Scan, todo: list[Slot], again: set[str]) -> None:
        from hermes_exp.run import environments, rescore
        from hermes_exp.worker import task as worker
        from hermes_exp.model.probe import probe
        from hermes_exp.worker import tracing

        ledger, guard, progress, redact = self.ledger, self.guard, self.progress, self.redact
        probe(settings["invocation"]["base_url"])
        tracing.probe(settings)  # the OTLP collector, when the run exports its spans
        _preflight(settings, found.images, own_images=bool(getattr(found.source, "own_images", False)))
        checked = environments.screen(self.executor, settings, ledger, found, todo)  # preflight=oracle
        progress.total -= len(todo) - len(checked)  # broken tasks are recorded, never dispatched
        todo = checked
        # What exists now (imports, config, the runtime: most of the heap) lives for the whole dispatch:
        # left out of the cyclic collector's full passes, which walked all of it several times a run.
        gc.freeze()
        tasks = guard.gate(_marked(ledger, found, todo))
        for result in self.executor.map_unordered(worker.run_task, settings, tasks):
            if not guard.observe(result, ledger):  # cancelled, or stopped by the budget: stays pending
                continue
            taken = record.take(result, redact)
            row = _redacted(ledger_row(result, self.filters, taken.score), redact)
            ledger.record(row, int(settings["batch_size"]))
            record.save(ledger, ledger.path.parent, row["key"], taken)
            self.ran, self.calls = self.ran + 1, self.calls + row["api_calls"]
            progress.verdict(taken.score)
            progress.task_cost(row["spent_usd"])  # before update: a log line shows the projection
            progress.note(**guard.note(row, result.limiter))  # first: a line printed now includes this task
            progress.update(row["state"])
        if again and not guard.stopped:
            rescore.report(rescore.reverify(self.executor, settings, ledger, rescore.rows_of(ledger, sorted(again)),
                                            self.filters), "failed verifications retried")


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


def stop_workers(run_id: str, grace: float, hurry: threading.Event | None = None) -> None:
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
