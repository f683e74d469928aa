"""Convert a task's raw OpenAI-format messages into a Hermes-compatible ShareGPT trajectory row."""

from __future__ import annotations

import json
from functools import lru_cache
from datetime import datetime, timezone
from typing import Any

from hermes_exp.model.reasoning import inline_reasoning, native_reasoning
from hermes_exp.errors import ConfigError
from hermes_exp.store.hermes_prompt import SYSTEM_MODES, signed_system, tool_signatures
from hermes_exp.tools.registry import Registry


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def gpt_value(message: dict[str, Any]) -> str:
    """`<think>` block, then the content as emitted, then one `<tool_call>` block per call."""
    content = _text(message.get("content"))
    reasoning = native_reasoning(message)
    if reasoning:
        value = f"<think>\n{reasoning}\n</think>\n{content}"
    elif inline_reasoning(content):
        value = content  # already carries its reasoning inline; never rewritten
    else:
        value = f"<think>\n</think>\n{content}"
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except json.JSONDecodeError:
            args = fn.get("arguments")  # invalid JSON stays exactly as the model emitted it
        block = json.dumps({"name": fn.get("name"), "arguments": args}, ensure_ascii=False)
        value += f"\n<tool_call>\n{block}\n</tool_call>"
    return value


def tool_value(messages: list[dict[str, Any]]) -> str:
    blocks = []
    for message in messages:
        content = message.get("content")
        try:
            content = json.loads(content)
        except (json.JSONDecodeError, TypeError):
            pass
        body = {"tool_call_id": message.get("tool_call_id"), "name": message.get("name"), "content": content}
        blocks.append(f"<tool_response>\n{json.dumps(body, ensure_ascii=False)}\n</tool_response>")
    return "\n".join(blocks)


def conversations(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    turns: list[dict[str, str]] = []
    pending_tools: list[dict[str, Any]] = []
    role_map = {"system": "system", "user": "human"}
    for message in messages:
        role = message.get("role")
        if role == "tool":
            pending_tools.append(message)
            continue
        if pending_tools:
            turns.append({"from": "tool", "value": tool_value(pending_tools)})
            pending_tools = []
        if role == "assistant":
            turns.append({"from": "gpt", "value": gpt_value(message)})
        elif role in role_map:
            turns.append({"from": role_map[role], "value": _text(message.get("content"))})
    if pending_tools:
        turns.append({"from": "tool", "value": tool_value(pending_tools)})
    return turns


def tool_stats(calls: list[dict[str, Any]], known: list[str]) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """Per known tool: count/success/failure, zero where unused, so every row has one schema."""
    stats = {name: {"count": 0, "success": 0, "failure": 0} for name in known}
    count_calls(calls, stats)
    return stats, {name: s["failure"] for name, s in stats.items()}


def count_calls(calls: list[dict[str, Any]], stats: dict[str, Any]) -> None:
    """Add tool calls to per-tool counters (count, success, failure); a tool not in `stats` is not
    counted (a hallucinated name). The one rule for a row's `tool_stats` and statistics.json's."""
    for call in calls:
        entry = stats.get(call.get("name"))
        if entry is not None:
            entry["count"] += 1
            entry["failure" if call.get("failed") else "success"] += 1


def system_mode(settings: dict[str, Any]) -> str:
    """`outputs.sharegpt.system`: `hermes` (Hermes's function-calling turn with the sample's tool
    signatures, then the system prompt sent) or `sent` (only the system prompt sent)."""
    mode = ((settings.get("outputs") or {}).get("sharegpt") or {}).get("system", "hermes")
    if mode not in SYSTEM_MODES:
        raise ConfigError(f"outputs.sharegpt.system={mode!r} is not valid; valid values: {', '.join(SYSTEM_MODES)}",
                          "set outputs.sharegpt.system=hermes (tool signatures in the system turn) or =sent")
    return mode


def offered_tools(row: dict[str, Any], result: dict[str, Any], registry: Registry | None = None) -> list[dict[str, Any]]:
    """The OpenAI tool list really sent to this sample (kept in the ledger beside its result)."""
    if row.get("tools"):
        return json.loads(row["tools"])
    # A row recorded before tool lists were kept: the run's registry rebuilds the list from its toolsets.
    return registry.schemas(list(result.get("toolsets", []))) if registry is not None else []


def sent_tools(row: dict[str, Any], result: dict[str, Any], registry: Registry | None = None) -> tuple[str, str]:
    """The tool list sent to this sample as a row's `tools` JSON text, and its `<tools>` signatures;
    made once per distinct list the ledger keeps (every sample of a toolset draw sends the same one)."""
    if row.get("tools"):
        return _list_texts(row["tools"])
    tools = offered_tools(row, result, registry)
    return json.dumps(tools, ensure_ascii=False), tool_signatures(tools)


@lru_cache(maxsize=64)
def _list_texts(kept: str) -> tuple[str, str]:
    tools = json.loads(kept)
    return json.dumps(tools, ensure_ascii=False), tool_signatures(tools)


def with_system(turns: list[dict[str, str]], signatures: str, mode: str) -> list[dict[str, str]]:
    """The turns with the system turn of `mode` first (the sent one, or Hermes's with the tools'
    `tool_signatures`)."""
    if mode == "sent":
        return turns
    sent = turns[0]["value"] if turns and turns[0]["from"] == "system" else None
    return [{"from": "system", "value": signed_system(signatures, sent)}, *(turns[1:] if sent is not None else turns)]


def trajectory(row: dict[str, Any], result: dict[str, Any], task_row: dict[str, Any], model: str,
               system: str, registry: Registry, score: dict[str, Any] | None = None) -> dict[str, Any]:
    """One ShareGPT row. `registry`: the run's (its known tools are the keys of `tool_stats`).
    `sample`, `reward` and `passed` are always there (null without a verifier), so every row has one schema."""
    stats, errors = tool_stats(result.get("tool_calls", []), registry.known_tools)
    extra = {k: v for k, v in task_row.items() if k != "prompt"}
    timestamp = datetime.fromtimestamp(row["finished_at"], timezone.utc).isoformat(timespec="seconds")
    tools, signatures = sent_tools(row, result, registry)
    return {
        "prompt_index": row["prompt_index"],
        "conversations": with_system(conversations(result.get("messages", [])), signatures, system),
        # A JSON string, as in Hermes's published datasets: nested schemas differ between samples.
        "tools": tools,
        "metadata": {**extra, "batch_num": row["batch_num"], "timestamp": timestamp, "model": model},
        "completed": bool(result.get("completed")),
        "partial": bool(result.get("partial")),
        "api_calls": int(result.get("api_calls", 0)),
        "toolsets_used": list(result.get("toolsets", [])),
        "tool_stats": stats,
        "tool_error_counts": errors,
        "sample": int(row.get("sample") or 0),
        "reward": (score or {}).get("reward"),
        "passed": (score or {}).get("passed"),
    }
