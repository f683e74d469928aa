"""One task: draw toolsets, open a sandbox, run the agent, close the sandbox -> a plain-data Result.

Workers never write run bookkeeping; whatever happens, they return a result dict."""

from __future__ import annotations

import threading
import time
import traceback
import uuid
from typing import Any

from hydra.utils import instantiate

from hermes_exp.agent.loop import Cancelled, Outcome, run_agent
from hermes_exp.agent.model import ModelClient
from hermes_exp.dataset import Task
from hermes_exp.distribution import draw
from hermes_exp.errors import HermesExpError, ProviderError, SandboxError
from hermes_exp.redact import Redactor, secret_names, wipe_environ_block
from hermes_exp.settings import load_prefill
from hermes_exp.tools.registry import tool_schemas

_RUNTIMES: dict[str, "Runtime"] = {}
_LOCK = threading.Lock()
# Set by the parent when the run stops early; conversations end at their next turn.
CANCEL = threading.Event()
_in_flight = 0


class Runtime:
    """What a process builds once per run and shares across its tasks: client, sandbox factory."""

    def __init__(self, settings: dict[str, Any]) -> None:
        runtime = settings["runtime"]
        self.client = ModelClient.from_settings(settings)  # shared: rate limiter, budget, auth circuit
        # the key is read: from now on a tool command reading /proc/$PPID/environ finds it blanked
        wipe_environ_block(secret_names(settings))
        self.sandboxes = instantiate(settings["sandbox"], run_id=runtime["run_id"], _convert_="all")
        self.toolsets = {str(k): float(v) for k, v in settings["distribution"]["toolsets"].items()}
        self.prefix = _prefix(settings)
        self.process = uuid.uuid4().hex[:12]  # names this process's figures in results (pids repeat across hosts)


def _prefix(settings: dict[str, Any]) -> list[dict[str, Any]]:
    system = "\n\n".join(p for p in (settings.get("system_prompt"), settings.get("ephemeral_system_prompt")) if p)
    return ([{"role": "system", "content": system}] if system else []) + load_prefill(settings.get("prefill_messages"))


def runtime_for(settings: dict[str, Any]) -> Runtime:
    run_id = settings["runtime"]["run_id"]
    with _LOCK:
        if run_id not in _RUNTIMES:
            _RUNTIMES[run_id] = Runtime(settings)
        return _RUNTIMES[run_id]


def release(run_id: str) -> None:
    """Shut down this process's runtime for a run (called by the parent at the end)."""
    with _LOCK:
        runtime = _RUNTIMES.pop(run_id, None)
    if runtime is not None:
        runtime.sandboxes.shutdown()


def limiter_figures(settings: dict[str, Any]) -> dict[str, Any] | None:
    """This process's rate limiter as the parent shows it (workers in other processes have their own)."""
    with _LOCK:
        runtime = _RUNTIMES.get(settings["runtime"]["run_id"])
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


def run_task(settings: dict[str, Any], task: Task) -> dict[str, Any]:
    """Run one task, retrying the whole task on transient failures (bounded, with backoff)."""
    _track(+1)
    try:
        attempts = max(1, int((settings.get("resume") or {}).get("task_attempts", 2)))
        spent = 0.0
        redact = Redactor.from_env(settings)
        for attempt in range(1, attempts + 1):
            result = _attempt(settings, task)
            if result.get("error"):  # provider bodies may echo the Authorization header
                result["error"] = redact(result["error"])
            result["task_attempts"] = attempt
            result["limiter"] = limiter_figures(settings)
            spent = result["spent_usd"] = spent + result.get("spent_usd", 0.0)
            if result["state"] != "error" or not result.get("transient") or attempt == attempts:
                return result
            if CANCEL.wait(min(2.0 ** attempt, 30.0)):
                break
        return result
    finally:
        _track(-1)


def _attempt(settings: dict[str, Any], task: Task) -> dict[str, Any]:
    started = time.time()
    result: dict[str, Any] = {"key": task.key, "index": task.index, "row": task.row, "started_at": started}
    if CANCEL.is_set():
        return {**result, "state": "cancelled", "finished_at": time.time()}
    client = None
    try:
        runtime = runtime_for(settings)
        client = runtime.client.for_task(task.key)  # counts this task's spend against budget.max_task_cost_usd
        toolsets = draw(runtime.toolsets, int(settings["seed"]), task.key)
        result["toolsets"] = toolsets
        tools = tool_schemas(toolsets)
        result["tools"] = tools  # the list really sent: ShareGPT's <tools> block and `tools` column
        result["tools_offered"] = [t["function"]["name"] for t in tools]
        sandbox = runtime.sandboxes.open(task.key, task.row)
        try:
            outcome = run_agent(client, sandbox, task.row["prompt"], tools, settings,
                                list(runtime.prefix), CANCEL)
        finally:
            sandbox.close()
        result.update(_finished(outcome))
    except Cancelled:
        result["state"] = "cancelled"
    except ProviderError as exc:
        result.update(state="error", error_class=exc.error_class, transient=exc.transient, error=str(exc),
                      stop_run=exc.stop_run)
        partial: Outcome | None = exc.outcome
        if partial is not None:
            result.update(api_calls=partial.api_calls, usage=partial.usage, messages=partial.messages)
    except SandboxError as exc:
        result.update(state="error", error_class="sandbox", transient=True, error=str(exc))
    except HermesExpError as exc:
        result.update(state="error", error_class="internal", transient=False, error=str(exc))
    except Exception as exc:  # a bug must fail its own task, never the batch
        result.update(state="error", error_class="internal", transient=False,
                      error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}")
    result["spent_usd"] = client.meter.spent if client is not None else 0.0
    result["finished_at"] = time.time()
    return result


def _finished(outcome: Outcome) -> dict[str, Any]:
    return {"state": "finished", "messages": outcome.messages, "api_calls": outcome.api_calls,
            "completed": outcome.completed, "partial": outcome.partial, "stop_reason": outcome.stop_reason,
            "stop_detail": outcome.stop_detail,
            "tool_calls": outcome.tool_calls, "usage": outcome.usage}
