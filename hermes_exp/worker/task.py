"""One task: draw toolsets, open a sandbox, run the agent, close the sandbox -> a TaskResult.

Workers never write run bookkeeping; whatever happens, they return a TaskResult (worker/result.py)."""

from __future__ import annotations

import os
import threading
import uuid
from typing import Any


from hermes_exp.agent.control import agent_kind, run_nop, run_oracle
from hermes_exp.agent.limits import for_row
from hermes_exp.agent.loop import Outcome, run_agent
from hermes_exp.dataset.tasks import Task
from hermes_exp.tools.distribution import draw
from hermes_exp.errors import Cancelled
from hermes_exp.dataset.readers import dataset_base_dir
from hermes_exp.settings.redact import Redactor, secret_names, wipe_environ_block
from hermes_exp.sandbox.base import Sandbox, SandboxFactory
from hermes_exp.sandbox.reaper import GROUP, PROCESS, ProcRegistry, die_with_parent
from hermes_exp.settings.resolved import api_key, load_prefill
from hermes_exp.tools.base import Resources
from hermes_exp.tools.readiness import drawable, services_url
from hermes_exp.tools.registry import Registry
from hermes_exp.tools.toolbox import Toolbox
from hermes_exp.worker.fixtures import prepare
from hermes_exp.worker.tracing import Tracer, wanted
from hermes_exp.worker.result import Reverified, TaskResult
from hermes_exp.verify.scoring import CannotReverify, Scorer, reverify_sample, run_plan, score_cost, verify_in_sandbox
from hermes_exp.settings.instantiation import construct

_RUNTIMES: dict[str, "Runtime"] = {}
_LOCK = threading.Lock()
# Set by the parent when the run stops early; conversations end at their next turn.
CANCEL = threading.Event()
_in_flight = 0


class Runtime:
    """What a process builds once per run and shares across its tasks: client, sandbox factory, the
    tool registry and the tools' shared resources (opened lazily, closed by `release`)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        invocation = settings["invocation"]
        from hermes_exp.model.client import ModelClient  # openai: only in processes that run tasks

        self.client = ModelClient.from_settings(settings, api_key(settings))  # shared: rate limiter, budget, auth circuit
        # the key is read: from now on a tool command reading /proc/$PPID/environ finds it blanked
        wipe_environ_block(secret_names(settings))
        self.sandboxes: SandboxFactory = construct(settings["sandbox"], "sandbox", run_id=invocation["run_id"], _convert_="all",
                                     base_dir=dataset_base_dir(settings.get("dataset")))  # for rows' build contexts
        self.registry = Registry.from_settings(settings)
        self.toolsets = drawable(settings, self.registry)
        self.resources = Resources()
        self.services = services_url(settings)
        self.limits = settings.get("tools") or {}
        self.prefix = _prefix(settings)
        self.process = uuid.uuid4().hex[:12]  # names this process's figures in results (pids repeat across hosts)
        self.scorer = Scorer(settings, self)
        self.setup_timeout = float(settings.get("setup_timeout") or 300)
        self.tracer = Tracer.for_settings(settings)  # None unless tracing.* turns it on
        self.settings = settings

    def toolbox(self, sandbox: Sandbox, client: Any) -> Toolbox:
        return Toolbox(self.registry, sandbox, self.limits, self.resources, self.services, client, self.settings)

    def close(self) -> None:
        try:
            self.resources.close()
        finally:
            self.sandboxes.shutdown()
            if self.tracer is not None:
                self.tracer.close()


def _prefix(settings: dict[str, Any]) -> list[dict[str, Any]]:
    system = "\n\n".join(p for p in (settings.get("system_prompt"), settings.get("ephemeral_system_prompt")) if p)
    return ([{"role": "system", "content": system}] if system else []) + load_prefill(settings.get("prefill_messages"))


def runtime_for(settings: dict[str, Any]) -> Runtime:
    run_id = settings["invocation"]["run_id"]
    with _LOCK:
        if run_id not in _RUNTIMES:
            _RUNTIMES[run_id] = Runtime(settings)
            _follow_parent(settings["invocation"])
        return _RUNTIMES[run_id]


def _follow_parent(invocation: dict[str, Any]) -> None:
    """In an executor worker started by the runner itself (loky): record this process for the run's
    reaper and end it, with the commands it started, when the runner dies."""
    parent = invocation.get("parent_pid")
    if parent and os.getpid() != parent and os.getppid() == parent:
        procs = ProcRegistry(invocation["run_id"])
        procs.add(os.getpid(), PROCESS)
        die_with_parent(parent, on_death=lambda: procs.reap(kinds=(GROUP,)))


def release(run_id: str) -> None:
    """Shut down this process's runtime for a run (called by the parent at the end)."""
    with _LOCK:
        runtime = _RUNTIMES.pop(run_id, None)
    if runtime is not None:
        runtime.close()


def limiter_figures(settings: dict[str, Any]) -> dict[str, Any] | None:
    """This process's rate limiter as the parent shows it (workers in other processes have their own)."""
    with _LOCK:
        runtime = _RUNTIMES.get(settings["invocation"]["run_id"])
    if runtime is None:
        return None
    stats = runtime.client.limiter.stats()
    return {"process": runtime.process, "concurrency": stats.concurrency, "rate_limited": stats.rate_limited}


def in_flight() -> int:
    """Tasks of this process currently inside run_task."""
    return _in_flight


def _track(delta: int) -> None:
    global _in_flight
    with _LOCK:
        _in_flight += delta


def run_task(settings: dict[str, Any], task: Task) -> TaskResult:
    """Run one task, retrying the whole task on transient failures (bounded, with backoff); one span
    for the task (and its attempts) when the run traces."""
    _track(+1)
    try:
        tracer = _tracer(settings)
        if tracer is None:
            return _attempts(settings, task, None)
        trace = tracer.start(task)
        result = _attempts(settings, task, trace)
        tracer.end(trace, result)
        return result
    finally:
        _track(-1)


def _tracer(settings: dict[str, Any]) -> Tracer | None:
    """The process's tracer for this run, when it traces; None when its runtime cannot be built (the
    task's attempt then fails with that error, and says so)."""
    if not wanted(settings):
        return None
    try:
        return runtime_for(settings).tracer
    except Exception:  # recorded by the attempt, which meets it again
        return None


def _attempts(settings: dict[str, Any], task: Task, trace: Any) -> TaskResult:
    attempts = max(1, int((settings.get("resume") or {}).get("task_attempts", 2)))
    spent = 0.0
    redact = Redactor.from_env(settings)
    for attempt in range(1, attempts + 1):
        result = _attempt(settings, task, trace)
        if result.error:  # provider bodies may echo the Authorization header
            result.error = redact(result.error)
        result.task_attempts = attempt
        result.limiter = limiter_figures(settings)
        spent = result.spent_usd = spent + (result.spent_usd or 0.0)
        if result.state != "error" or not result.transient or attempt == attempts:
            return result
        if CANCEL.wait(min(2.0 ** attempt, 30.0)):
            break
    return result


def verify_task(settings: dict[str, Any], item: dict[str, Any]) -> Reverified:
    """Verify one finished sample again, without its agent (see hermes_exp.run.rescore)."""
    _track(+1)
    score, skipped = None, None
    try:
        runtime = runtime_for(settings)
        score = reverify_sample(runtime.scorer, runtime.sandboxes, item)
    except Exception as exc:  # no archive, the engine is down: the old scores stand (`skipped` says why)
        skipped = str(exc) if isinstance(exc, CannotReverify) else f"{type(exc).__name__}: {exc}"
    finally:
        _track(-1)
    return Reverified(item["key"], item["result"], score.to_dict() if score else None,
                      score.cost_usd if score else 0.0, skipped)


def _attempt(settings: dict[str, Any], task: Task, trace: Any = None) -> TaskResult:
    result = TaskResult.start(task)
    if CANCEL.is_set():
        result.cancel()
        result.end(0.0)
        return result
    client = None
    try:
        runtime = runtime_for(settings)
        client = runtime.client.for_task(task.key)  # counts this task's spend against budget.max_task_cost_usd
        toolsets = draw(runtime.toolsets, int(settings["seed"]), task.key)
        result.offer(toolsets, runtime.registry.schemas(toolsets))
        _session(runtime, client, task, settings, result, trace)
    except Cancelled:
        result.cancel()
    except Exception as exc:  # a bug must fail its own task, never the batch
        result.fail(exc)
    result.end((client.meter.spent if client is not None else 0.0) + score_cost(result.score))
    return result


def _session(runtime: Runtime, client: Any, task: Task, settings: dict[str, Any], result: TaskResult,
             trace: Any = None) -> None:
    """Sandbox open -> fixtures -> agent -> (verifier in the sandbox) -> tools' and sandbox's close
    -> (verifier outside), each phase timed in `result.timings`."""
    plan = runtime.scorer.plan(task.row)
    settings = for_row(settings, task.row)  # the row's own limits (Harbor's agent timeout)
    with result.phase("sandbox"):
        sandbox = runtime.sandboxes.open(task.key, task.row)
    toolbox = None
    try:
        with result.phase("fixtures"):
            prepare(sandbox, task.row, runtime.scorer.context.base_dir, runtime.setup_timeout)
        toolbox = runtime.toolbox(sandbox, client)
        with result.phase("agent"):
            result.finish(_agent(runtime, client, toolbox, sandbox, task, result.tools, settings, trace))
        if plan is not None and plan.needs_sandbox:
            with result.phase("verifier"):
                score, archive, note = verify_in_sandbox(plan, sandbox, task.row, result.to_dict())
            result.verified(score.to_dict(), archive, note)
    finally:
        with result.phase("close"):
            _close(toolbox, sandbox, result)
    if plan is not None and not plan.needs_sandbox:
        with result.phase("verifier"):
            result.verified(run_plan(plan, None, task.row, result.to_dict()).to_dict())


def _close(toolbox: Toolbox | None, sandbox: Sandbox, result: TaskResult) -> None:
    try:
        if toolbox is not None:
            toolbox.close()  # the task's own tool resources go before its sandbox
            if toolbox.model_calls:  # vision calls: recorded and counted in the cost
                result.tool_model_calls = toolbox.model_calls
    finally:
        sandbox.close()


def _agent(runtime: Runtime, client: Any, toolbox: Toolbox, sandbox: Sandbox, task: Task,
           tools: list[dict[str, Any]], settings: dict[str, Any], trace: Any = None) -> Outcome:
    kind = agent_kind(settings)
    if kind == "oracle":
        return run_oracle(sandbox, settings, task.row, runtime.scorer.context.base_dir)
    if kind == "nop":
        return run_nop(settings, task.row)
    return run_agent(client, toolbox, task.row["prompt"], tools, settings, list(runtime.prefix), CANCEL, trace)
