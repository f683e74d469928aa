"""Which tasks an invocation runs: the dataset's keys minus what the ledger says is settled,
according to the user's resume intent (continue, retry error classes, redo filtered, redo all)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

from hermes_exp.run import pilot
from hermes_exp.dataset.tasks import Scan, Slot
from hermes_exp.errors import ERROR_CLASSES, VERIFIER, ConfigError
from hermes_exp.run.scan_cache import ScanCache
from hermes_exp.store import planning
from hermes_exp.store.ledger import Ledger

DEFAULT_RETRY = ("provider", "sandbox")


def intent(settings: dict[str, Any]) -> dict[str, Any]:
    """The `resume` config, validated."""
    resume = dict(settings.get("resume") or {})
    retry = resume.get("retry_errors")
    retry = list(DEFAULT_RETRY if retry is None else retry)
    bad = [c for c in retry if c not in ERROR_CLASSES]
    if bad:
        raise ConfigError(f"resume.retry_errors has unknown error class(es) {bad}",
                          f"choose from: {', '.join(ERROR_CLASSES)}, e.g. resume.retry_errors=[provider,model]")
    return {"retry": set(retry), "redo_filtered": bool(resume.get("redo_filtered")),
            "redo_all": bool(resume.get("redo_all"))}


def samples_per_prompt(settings: dict[str, Any]) -> int:
    """`samples_per_prompt`, validated: raising it later runs only the new samples; lowering it hides
    the extra ones from exports (they stay in the ledger)."""
    value = settings.get("samples_per_prompt", 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"samples_per_prompt must be a positive integer, got {value!r}",
                          "set samples_per_prompt=<n> with n >= 1 (attempts per prompt, for pass@k)")
    return value


def pending(indexed: list[Slot], states: dict[str, tuple[str, str | None]],
            wanted: dict[str, Any]) -> list[Slot]:
    """Every task to run now, in dataset order. Tasks never seen, and `running` rows left by a crash,
    always run; `done` never unless redo_all; `error` when its class is to be retried. A failed
    verification (class `verifier`) never re-runs the agent: only its verification is re-run."""
    out: list[Slot] = []
    for slot in indexed:
        state, error_class = states.get(slot.key, ("new", None))
        if wanted["redo_all"] or state in ("new", "running"):
            out.append(slot)
        elif state == "filtered" and wanted["redo_filtered"]:
            out.append(slot)
        elif state == "error" and error_class in wanted["retry"] and error_class != VERIFIER:
            out.append(slot)
    return out


def to_reverify(indexed: list[Slot], states: dict[str, tuple[str, str | None]]) -> list[Slot]:
    """Tasks whose agent finished but whose verification failed: verified again, agent untouched."""
    return [s for s in indexed if states.get(s.key) == ("error", VERIFIER)]


def outside(indexed: list[Slot], states: dict[str, tuple[str, str | None]]) -> int:
    """How many of the ledger's tasks the dataset no longer has (a row edited or removed, a lower
    samples_per_prompt): their results stay in the ledger, out of the exports, statistics and exit code."""
    return len(states.keys() - {slot.key for slot in indexed})


class Plan(NamedTuple):
    todo: list[Slot]  # tasks the agent runs now
    again: set[str]  # failed verifications to verify again
    chosen: list[str]  # a pilot's tasks
    gone: int  # tasks of the ledger the dataset no longer has
    total: int  # tasks of the (selected) dataset


SETTLED = "settled"  # derived from the ledger: the last plan that found nothing to run, and what it saw


def plan_invocation(ledger: Ledger, cache: ScanCache, found: Scan, scan: Callable[[], Scan], selection: Any,
                    wanted: dict[str, Any], k: int | None) -> tuple[Scan, Plan]:
    """The scan this invocation works from and what it runs. `found`: a real scan, or the cache's
    (without a spool, its keys maybe not loaded), which only ever plans a run with nothing to do: any
    work is planned again from a real scan. While no task row was written since the last plan that
    found nothing to run, and the cached scan is the one it saw, that verdict holds without reading
    either again."""
    if found.spool is None:
        memo = None if k else settled_verdict(ledger, cache.identity())
        if memo is not None:
            return found, Plan([], set(), [], memo["gone"], memo["tasks"])
        found = cache.load() or scan()
    plan = _plan(ledger, found, selection, wanted, k)
    if found.spool is None and (plan.todo or plan.again):  # cached keys, and work to do: run it from a real scan
        found = plan = None  # type: ignore[assignment]  # not held through the real scan
        found = scan()
        plan = _plan(ledger, found, selection, wanted, k)
    if found.spool is not None:
        cache.save(found)
    identity = cache.identity()
    if identity and not k and not plan.todo and not plan.again:
        ledger.set_derived(SETTLED, {"scan": identity, "selection": ledger.meta("selection"), "gone": plan.gone,
                                     "tasks": plan.total})
    return _to_run(found, plan.todo), plan


def _to_run(found: Scan, todo: list[Slot]) -> Scan:
    """The scan cut to the tasks this invocation runs, in dataset order: the other tasks' keys and spool
    offsets (~0.3 KB per task) are not held through the run and its export."""
    keys = {slot.key for slot in todo}
    indexed = [slot for slot in found.indexed if slot.key in keys]
    rows = {slot.index for slot in indexed}
    return dataclasses.replace(found, indexed=indexed, offsets={i: at for i, at in found.offsets.items() if i in rows})


def settled_verdict(ledger: Any, identity: str | None) -> dict[str, Any] | None:
    """The last settled plan's verdict, when it was made from this cached scan and selection and no
    task row was written since. `ledger`: what reads its meta rows (`meta`, `derived`)."""
    memo = ledger.derived(SETTLED)
    if not isinstance(memo, dict) or not identity:
        return None
    same = memo.get("scan") == identity and memo.get("selection") == ledger.meta("selection")
    return memo if same and isinstance(memo.get("gone"), int) and isinstance(memo.get("tasks"), int) else None


def _plan(ledger: Ledger, found: Scan, selection: Any, wanted: dict[str, Any], k: int | None) -> Plan:
    """Bring the ledger in line with the scanned dataset (row positions, task count, selection) and
    say what this invocation runs: pending / to_reverify / outside's rules, joined in SQLite."""
    with planning.scanned(ledger, found.indexed):
        planning.reindex(ledger)
        ledger.set_meta({"dataset_tasks": str(len(found.indexed))})
        gone = planning.outside(ledger)
        ledger.set_selection([entry[1] for entry in found.indexed] if selection.narrows or gone else None)
        todo = planning.pending(ledger, wanted, VERIFIER)
        again = planning.to_reverify(ledger, VERIFIER)
    chosen = [entry[1] for entry in pilot.spread(found.indexed, k)] if k else []
    todo = pilot.restrict(todo, set(chosen)) if k else todo
    return Plan(todo, again - {slot.key for slot in todo}, chosen, gone, len(found.indexed))
