"""ATIF v1.8 (Harbor's Agent Trajectory Interchange Format): one trajectory per kept sample, from its raw
result, as one line of `trajectories.atif.jsonl`. Plain JSON: no ATIF package is needed to write or read it
(the tests validate every file with the `atif` package's models)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from hermes_exp.model.reasoning import native_reasoning
from hermes_exp.store.sharegpt import offered_tools
from hermes_exp.tools.registry import Registry

SCHEMA_VERSION = "ATIF-v1.8"
ATIF_FILE = "trajectories.atif.jsonl"
AGENT_NAME = "hermes-exp"
# usage figures kept beside ATIF's own per-step metrics (under metrics.extra), when the call reported them
_USAGE_EXTRA = ("reasoning_tokens", "cache_write_tokens", "cost_source", "seconds")


def atif_record(row: dict[str, Any], result: dict[str, Any], model: str, score: dict[str, Any] | None = None,
                registry: Registry | None = None) -> dict[str, Any]:
    """One kept sample as an ATIF trajectory: a step per message (system, user, agent), each agent step
    with its tool calls, their results as its observation, and the model call's metrics (token counts,
    cost, and the turn's token IDs and logprobs when the ledger has them); the reward under `extra`."""
    messages = result.get("messages") or []
    steps = _steps(messages, _calls(messages, result.get("usage") or []), result.get("tool_calls") or [], model)
    extra = {k: v for k, v in (result.get("row") or {}).items() if k != "prompt"}
    return _without_none({
        "schema_version": SCHEMA_VERSION,
        "session_id": row["key"],
        "agent": {"name": AGENT_NAME, "version": _version(), "model_name": model,
                  "tool_definitions": offered_tools(row, result, registry)},
        "steps": steps,
        "final_metrics": _final_metrics(result, len(steps)),
        "extra": {"prompt_index": row["prompt_index"], "sample": int(row.get("sample") or 0),
                  "reward": (score or {}).get("reward"), "passed": (score or {}).get("passed"),
                  "completed": bool(result.get("completed")), "partial": bool(result.get("partial")),
                  "stop_reason": result.get("stop_reason"), "api_calls": int(result.get("api_calls", 0)),
                  "toolsets": list(result.get("toolsets", [])), "batch_num": row["batch_num"],
                  "timestamp": _timestamp(row.get("finished_at")), "metadata": extra},
    })


def _calls(messages: list[dict[str, Any]], usage: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """Each assistant message's model call, in order (the agent loop records one per saved turn): its usage;
    {} when the calls cannot be told apart (then only the totals have their figures); None for a turn no
    model wrote (agent=oracle, nop: no calls at all)."""
    turns = sum(1 for m in messages if m.get("role") == "assistant")
    if len(usage) == turns:
        return list(usage)
    return [{} if usage else None for _ in range(turns)]


def _steps(messages: list[dict[str, Any]], calls: list[dict[str, Any] | None], outcomes: list[dict[str, Any]],
           model: str) -> list[dict[str, Any]]:
    """The steps in order; tool messages become the observation of the agent step whose calls they answer
    (`outcomes`: the result's tool_calls, one per tool message, in order)."""
    replies = sum(1 for m in messages if m.get("role") == "tool")
    paired = iter(outcomes if len(outcomes) == replies else [None] * replies)
    turns = iter(calls)
    steps: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            outcome = next(paired)
            if steps:
                _observe(steps[-1], message, outcome)
        elif role == "assistant":
            steps.append(_agent_step(message, next(turns), model))
        else:
            steps.append({"source": "system" if role == "system" else "user", "message": _text(message.get("content"))})
    return [{"step_id": number, **_without_none(step)} for number, step in enumerate(steps, 1)]


def _agent_step(message: dict[str, Any], call: dict[str, Any] | None, model: str) -> dict[str, Any]:
    """An assistant turn; `call`: its model call's usage (None: no model wrote it, so no metrics)."""
    calls = [_tool_call(c, i) for i, c in enumerate(message.get("tool_calls") or [])]
    return {"source": "agent", "model_name": model if call is not None else None,
            "message": _text(message.get("content")),
            "reasoning_content": (native_reasoning(message) or None) if call is not None else None,
            "tool_calls": calls or None, "metrics": (_metrics(message, call) or None) if call is not None else None,
            "llm_call_count": 1 if call is not None else 0}


def _tool_call(call: dict[str, Any], index: int) -> dict[str, Any]:
    """ATIF wants the arguments as an object: arguments that are not a JSON object (a model's malformed
    call) go in as {} with the text exactly as emitted under extra.arguments_text."""
    fn = call.get("function") or {}
    text = fn.get("arguments")
    try:
        arguments = json.loads(text) if isinstance(text, str) and text.strip() else {}
    except json.JSONDecodeError:
        arguments = None
    ok = isinstance(arguments, dict)
    return _without_none({"tool_call_id": str(call.get("id") or f"call_{index}"), "function_name": fn.get("name") or "",
                          "arguments": arguments if ok else {}, "extra": None if ok else {"arguments_text": text}})


def _observe(step: dict[str, Any], message: dict[str, Any], outcome: dict[str, Any] | None) -> None:
    """One tool message as a result in the step's observation, tied to its call by id."""
    ids = {c["tool_call_id"] for c in step.get("tool_calls") or []}
    call_id = message.get("tool_call_id")
    tied = call_id if call_id in ids else None
    extra = {"name": message.get("name"), "tool_call_id": call_id if tied is None else None,
             "failed": (outcome or {}).get("failed"), "seconds": (outcome or {}).get("seconds")}
    result = {"source_call_id": tied, "content": _text(message.get("content")), "extra": _without_none(extra)}
    step.setdefault("observation", {"results": []})["results"].append(_without_none(result))


def _metrics(message: dict[str, Any], usage: dict[str, Any]) -> dict[str, Any]:
    """The call's token counts and cost, and the turn's token IDs and logprobs where the ledger has them
    (absent where it has none: never an empty list standing for "not returned")."""
    logprobs = (message.get("logprobs") or {}).get("content") if "logprobs" in message else None
    extra = {k: usage[k] for k in _USAGE_EXTRA if usage.get(k) is not None}
    if logprobs is not None:
        extra["logprob_tokens"] = [t.get("token") for t in logprobs]
        if any(t.get("top_logprobs") for t in logprobs):
            extra["top_logprobs"] = [t.get("top_logprobs") or [] for t in logprobs]
    return _without_none({  # (an empty dict when there is nothing: no metrics, then)
        "prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens"),
        "cached_tokens": usage.get("cached_tokens"), "cost_usd": usage.get("cost_usd") if _priced([usage]) else None,
        "prompt_token_ids": message.get("prompt_token_ids"), "completion_token_ids": message.get("token_ids"),
        "logprobs": [t.get("logprob") for t in logprobs] if logprobs is not None else None,
        "extra": extra or None})


def _final_metrics(result: dict[str, Any], steps: int) -> dict[str, Any]:
    """Totals as the ledger counts them (store/rows.py): the cost includes the model calls tools made
    (vision), said apart under extra.tool_model_cost_usd; absent when no call's cost is known."""
    usage, tools = result.get("usage") or [], result.get("tool_model_calls") or []
    total = lambda key, rows: sum(u.get(key) or 0 for u in rows)  # noqa: E731
    return _without_none({
        "total_prompt_tokens": total("prompt_tokens", usage), "total_completion_tokens": total("completion_tokens", usage),
        "total_cached_tokens": total("cached_tokens", usage),
        "total_cost_usd": float(total("cost_usd", usage + tools)) if _priced(usage + tools) else None,
        "total_steps": steps,
        "extra": _without_none({"reasoning_tokens": total("reasoning_tokens", usage),
                                "tool_model_cost_usd": float(total("cost_usd", tools)) if _priced(tools) else None})})


def _priced(calls: list[dict[str, Any]]) -> bool:
    """Whether any of these calls' cost is known: a call with no price and no cost in its answer is
    booked at 0 (cost_source "unknown"), which is not a cost of 0."""
    return any(c.get("cost_source") != "unknown" for c in calls)


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts: their text, as in the ShareGPT rows
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _timestamp(finished_at: float | None) -> str | None:
    if finished_at is None:
        return None
    return datetime.fromtimestamp(finished_at, timezone.utc).isoformat(timespec="seconds")


def _without_none(value: dict[str, Any]) -> dict[str, Any]:
    """ATIF leaves unset fields out rather than writing null."""
    return {k: v for k, v in value.items() if v is not None}


def _version() -> str:
    try:
        return version("hermes-exp")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "0"
