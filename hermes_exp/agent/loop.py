"""The turn loop: model and tools take turns until a final answer or `max_turns` model calls."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hermes_exp.model.encode import forget
from hermes_exp.agent.limits import TaskLimits, is_context_overflow, tokens_used
from hermes_exp.errors import Cancelled, ModelError, ProviderError
from hermes_exp.stops import Stop
from hermes_exp.tools.registry import is_failure
from hermes_exp.tools.toolbox import Toolbox

if TYPE_CHECKING:  # the client (and openai) are imported only by runs that call a model
    from hermes_exp.agent.spans import TaskTrace  # and OpenTelemetry only by runs that trace
    from hermes_exp.model.client import ModelClient, Reply

# Stop a conversation whose model keeps calling tools that do not exist or with broken arguments.
MAX_CONSECUTIVE_INVALID = 3


@dataclass
class Outcome:
    """What one conversation produced: the saved messages (without ephemeral parts) and facts."""

    messages: list[dict[str, Any]]
    api_calls: int = 0
    completed: bool = False
    partial: bool = False
    stop_reason: str = ""  # a hermes_exp.stops.Stop
    stop_detail: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: list[dict[str, Any]] = field(default_factory=list)

    def stop(self, reason: Stop, detail: str, partial: bool = True) -> Outcome:
        self.stop_reason, self.stop_detail, self.partial = reason, detail, partial
        return self


def to_wire(message: dict[str, Any]) -> dict[str, Any]:
    """An assistant message as sent back: role, content and tool calls exactly as received (a null
    content becomes "" in the request only where model.interop.null_content_as_empty says so)."""
    wire = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        wire["tool_calls"] = message["tool_calls"]
    return wire


def as_sent(message: dict[str, Any]) -> dict[str, Any]:
    """A saved message as it went on the wire: an assistant message as received (without reasoning
    fields), a tool result without its `name`; the rest as saved. Replaying a stored conversation
    through this reproduces its requests (tests/test_round_trip.py)."""
    if message.get("role") == "assistant":
        return to_wire(message)
    if message.get("role") == "tool":
        return {k: v for k, v in message.items() if k != "name"}
    return message


def run_agent(client: ModelClient, toolbox: Toolbox, prompt: str, tools: list[dict[str, Any]],
              settings: dict[str, Any], prefix: list[dict[str, Any]],
              cancel: threading.Event | None = None, trace: TaskTrace | None = None) -> Outcome:
    """`prefix` (system prompt with its ephemeral part, prefill) is sent but never saved. `trace`: the
    task's span, when the run traces (tracing.*), under which each model and tool call gets its own."""
    try:
        return _conversation(client, toolbox, prompt, tools, settings, prefix, cancel, trace)
    finally:
        forget()  # the thread's serialised pieces of this conversation


def _conversation(client: ModelClient, toolbox: Toolbox, prompt: str, tools: list[dict[str, Any]],
                  settings: dict[str, Any], prefix: list[dict[str, Any]], cancel: threading.Event | None,
                  trace: TaskTrace | None) -> Outcome:
    system = settings.get("system_prompt")
    saved = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    wire = prefix + [{"role": "user", "content": prompt}]
    out = Outcome(messages=saved)
    offered = [t["function"]["name"] for t in tools]
    limits, started = TaskLimits.from_settings(settings), time.monotonic()
    invalid_streak = 0
    for _ in range(int(settings["max_turns"])):
        if cancel is not None and cancel.is_set():
            raise Cancelled()
        reached = limits.reached(started, out.usage)
        if reached:
            return out.stop(reached, f"limits.{reached} reached ({_spent(reached, started, out)})")
        reply = _call(client, wire, tools, out, trace)
        if reply is None:
            return out.stop(Stop.CONTEXT_OVERFLOW, "the provider refused the prompt: it exceeds the model's context")
        _check_usable(reply, out)
        saved.append({**reply.message, **reply.tokens, "role": "assistant"})  # tokens: beside their text
        wire.append(to_wire(reply.message))
        if reply.finish_reason == "length":
            return out.stop(Stop.CONTEXT_OVERFLOW, "finish_reason=length: the answer was cut at the token limit")
        calls = reply.message.get("tool_calls") or []
        if not calls:
            out.completed = True
            return out.stop(Stop.FINAL_ANSWER, "the model answered without a tool call", partial=False)
        invalid_streak = _run_calls(toolbox, calls, offered, out, wire, invalid_streak, trace)
        if invalid_streak >= MAX_CONSECUTIVE_INVALID:
            return out.stop(Stop.INVALID_TOOL_CALLS, f"{invalid_streak} invalid tool calls in a row")
    return out.stop(Stop.MAX_TURNS, f"max_turns ({settings['max_turns']}) reached without a final answer", partial=False)


def _call(client: ModelClient, wire: list[dict[str, Any]], tools: list[dict[str, Any]], out: Outcome,
          trace: TaskTrace | None) -> Reply | None:
    """One model call recorded in `out`; None when the provider says the prompt exceeds the context."""
    started = time.time()
    try:
        reply = client.complete(wire, tools)
    except ProviderError as exc:
        if trace is not None:
            trace.model_call(started, out.messages, error=exc)
        if is_context_overflow(exc):
            return None
        exc.outcome = out  # calls already made (and paid for) stay on record
        raise
    if trace is not None:
        trace.model_call(started, out.messages, reply)
    out.api_calls += 1
    out.usage.append({**reply.usage, "served_by": reply.served_by, "attempts": reply.attempts,
                      "seconds": round(time.time() - started, 3)})
    return reply


def _check_usable(reply: Reply, out: Outcome) -> None:
    """Raise ModelError (with the conversation so far) for a reply that cannot be an assistant turn."""
    message, problem = reply.message, ""
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if not isinstance(message, dict):
        problem = f"the reply's message is {type(message).__name__} JSON, not an object"
    elif calls is not None and not (isinstance(calls, list) and all(
            isinstance(c, dict) and isinstance(c.get("function", {}), dict) for c in calls)):
        problem = f"its tool_calls are not a list of call objects: {str(calls)[:200]!r}"
    if problem:
        error = ModelError(f"unusable model reply after {out.api_calls} call(s): {problem}",
                           "try another model or provider; resume.retry_errors=[provider, sandbox, model] retries it")
        error.outcome = out  # the calls made, and paid for, stay on record
        raise error


def _spent(reached: Stop, started: float, out: Outcome) -> str:
    if reached == Stop.TASK_SECONDS:
        return f"{time.monotonic() - started:.1f} s"
    return f"{tokens_used(out.usage)} tokens"


def _run_calls(toolbox: Toolbox, calls: list[dict[str, Any]], offered: list[str], out: Outcome,
               wire: list[dict[str, Any]], invalid_streak: int, trace: TaskTrace | None) -> int:
    for call in calls:
        fn = call.get("function") or {}
        name = fn.get("name") or ""
        started = time.time()
        try:
            content, valid = toolbox.call(name, fn.get("arguments"), offered)
        except Exception as exc:  # a sandbox failure: it ends the task
            if trace is not None:
                trace.tool_call(started, call, error=exc)
            raise
        failed = is_failure(content)
        if trace is not None:
            trace.tool_call(started, call, content, valid, failed)
        invalid_streak = 0 if valid else invalid_streak + 1
        out.tool_calls.append({"name": name, "failed": failed, "offered": name in offered,
                               "seconds": round(time.time() - started, 3)})
        message = {"role": "tool", "tool_call_id": call.get("id", ""), "name": name, "content": content}
        out.messages.append(message)
        wire.append(as_sent(message))
    return invalid_streak
