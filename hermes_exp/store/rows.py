"""A worker's result as its ledger row: the state it settles in (done, filtered or error) and the
figures the ledger keeps in columns (tokens, cost, stop reason) beside the raw result."""

from __future__ import annotations

import json
from typing import Any

from hermes_exp.store.filters import Filter
from hermes_exp.store import score_record as record
from hermes_exp.worker.result import TaskResult


# A run's tasks bring back the few lists of their toolset draws, the same objects in every result of a
# thread worker (tools.registry): each is serialised once, not per task. Keyed by identity, the list held.
_TOOL_TEXTS: dict[int, tuple[list[dict[str, Any]], str]] = {}
_MAX_TOOL_TEXTS = 64


def tools_text(tools: list[dict[str, Any]]) -> str:
    """A sent tool list's JSON text, as the ledger keeps it."""
    held = _TOOL_TEXTS.get(id(tools))
    if held is None or held[0] is not tools:
        if len(_TOOL_TEXTS) >= _MAX_TOOL_TEXTS:
            _TOOL_TEXTS.clear()
        held = _TOOL_TEXTS[id(tools)] = (tools, json.dumps(tools, ensure_ascii=False))
    return held[1]


def ledger_row(result: TaskResult, filters: list[Filter],
               score: dict[str, Any] | None = None) -> dict[str, Any]:
    """Map a worker's result to its ledger row, deciding done / filtered / error; a failed verification
    is error class `verifier`. `score`: the result's verification, taken apart (score_record.take)."""
    usage = result.usage or []
    tool_usage = result.tool_model_calls or []
    stored = result.stored()  # without the score, archive and tool list, which the ledger keeps apart
    row = {
        "key": result.key, "prompt_index": result.index, "prompt": result.row["prompt"],
        "sample": result.sample,
        "toolsets": json.dumps(result.toolsets or []), "result": json.dumps(stored, ensure_ascii=False),
        "api_calls": result.api_calls or 0, "started_at": result.started_at,
        "finished_at": result.finished_at, "reason": None, "error_class": None, "error": None,
        "task_attempts": result.task_attempts or 1,
        "prompt_tokens": sum(u.get("prompt_tokens", 0) for u in usage),
        "completion_tokens": sum(u.get("completion_tokens", 0) for u in usage),
        "reasoning_tokens": sum((u.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0 for u in usage),
        "cached_tokens": sum(u.get("cached_tokens") or 0 for u in usage),
        "cache_write_tokens": sum(u.get("cache_write_tokens") or 0 for u in usage),
        "stop_reason": result.stop_reason,
        "context_tokens": (usage[-1].get("prompt_tokens", 0) + usage[-1].get("completion_tokens", 0)) if usage else 0,
        "cost_usd": sum(u.get("cost_usd") or 0.0 for u in usage + tool_usage),
        "spent_usd": result.spent_usd or 0.0,  # every in-run attempt; the ledger adds earlier ones
    }
    if result.tools is not None:
        row["tools"] = tools_text(result.tools)  # kept once per distinct list in the ledger, not in every result
    if result.state == "error":
        row.update(state="error", error_class=result.error_class, error=result.error)
    else:
        state, reason, error_class, error = record.judged(stored, score, filters)
        row.update(state=state, reason=reason, error_class=error_class, error=error)
    return row
