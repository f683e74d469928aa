"""statistics.json: computed from the whole ledger (every invocation), never just the last one."""

from __future__ import annotations

import json
import math
from collections import Counter
from datetime import datetime, timezone
from typing import Any

from hermes_exp.store.reasoning import has_reasoning
from hermes_exp.store.sharegpt import count_calls
from hermes_exp.verify.metrics import VerifyStats

TOKEN_KEYS = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens", "cache_write_tokens")


class StatsBuilder:
    """Fed one ledger row at a time (streaming), so memory stays flat in the size of the run."""

    def __init__(self, known_tools: list[str]) -> None:
        self.states: Counter[str] = Counter()
        self.filtered: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.tools = {name: Counter() for name in known_tools}
        self.reasoning = Counter()
        self.tokens: Counter[str] = Counter()
        self.api_calls = 0
        self.cost_usd = self.spent_usd = 0.0  # recorded attempts; every attempt (what the budget counts)
        self.served_by: Counter[str] = Counter()
        self.batches: set[int] = set()
        self.completed = 0
        self.stops: Counter[str] = Counter()
        self.lengths: list[int] = []  # tokens of each kept sample (its last call's prompt + completion)
        self.last_finished = 0.0
        self.verification = VerifyStats()

    def add(self, row: dict[str, Any], result: dict[str, Any] | None, score: dict[str, Any] | None = None) -> None:
        """`result`: the decoded raw result of a kept task (None otherwise); `score`: the sample's
        score under the current verifier (None when not verified)."""
        self.verification.add(row, score)
        self.states[row["state"]] += 1
        for key in TOKEN_KEYS:
            self.tokens[key] += row.get(key) or 0
        self.api_calls += row.get("api_calls") or 0
        self.cost_usd += row.get("cost_usd") or 0.0
        self.spent_usd += row.get("spent_usd") or 0.0
        if row["state"] == "filtered":
            self.filtered[row["reason"] or "unknown"] += 1
        if row["state"] == "error":
            self.errors[row["error_class"] or "unknown"] += 1
        if row["state"] in ("done", "filtered") and row.get("stop_reason"):
            self.stops[row["stop_reason"]] += 1
        if row["state"] != "done" or result is None:
            return
        if row.get("context_tokens"):
            self.lengths.append(row["context_tokens"])
        self.batches.add(row["batch_num"])
        self.completed += bool(result.get("completed"))
        self.served_by.update(u["served_by"]["provider"] for u in result.get("usage", [])
                              if (u.get("served_by") or {}).get("provider"))
        self.last_finished = max(self.last_finished, row["finished_at"] or 0)
        count_calls(result.get("tool_calls", []), self.tools)
        for message in result.get("messages", []):
            if message.get("role") == "assistant":
                self.reasoning["total_assistant_turns"] += 1
                self.reasoning["turns_with_reasoning"] += has_reasoning(message)

    def build(self, settings: dict[str, Any], invocations: list[dict[str, Any]],
              dataset_tasks: int | None = None) -> dict[str, Any]:
        """`dataset_tasks`: the valid prompts of the dataset as last read (the ledger only knows the
        tasks it has seen), so `pending` counts what is still to run."""
        ran = [i for i in invocations if i.get("tasks_run")]
        duration = sum((i["finished_at"] or i["started_at"]) - i["started_at"] for i in ran)
        turns = self.reasoning["total_assistant_turns"]
        with_r = self.reasoning["turns_with_reasoning"]
        return {
            "run_name": settings["run_name"],
            "distribution": settings["distribution"]["name"],
            "model": settings["model"]["name"],
            "total_prompts": max(dataset_tasks or 0, sum(self.states.values())),
            "pending": max(dataset_tasks or 0, sum(self.states.values()))
            - self.states["done"] - self.states["filtered"] - self.states["error"],
            "kept": self.states["done"],
            "filtered": self.states["filtered"],
            "failed": self.states["error"],
            "completed_trajectories": self.completed,
            "total_batches": len(self.batches),
            "batch_size": settings["batch_size"],
            "completed_at": _iso(self.last_finished),
            "duration_seconds": round(duration, 3),
            "invocations": len(ran),
            "api_calls": self.api_calls,
            "tokens": dict(self.tokens),
            # share of prompt tokens read from the provider's cache (model.cache_control)
            "cache_hit_share": round(self.tokens["cached_tokens"] / self.tokens["prompt_tokens"], 4)
            if self.tokens["prompt_tokens"] else 0.0,
            "cost_usd": round(self.cost_usd, 8),
            "spent_usd": round(self.spent_usd, 8),
            "served_by": dict(sorted(self.served_by.items())),
            "tool_statistics": {name: _rates(c) for name, c in self.tools.items()},
            "reasoning_statistics": {"total_assistant_turns": turns, "turns_with_reasoning": with_r,
                                     "turns_without_reasoning": turns - with_r,
                                     "coverage_percent": round(100 * with_r / turns, 2) if turns else 0.0},
            "stop_reasons": dict(sorted(self.stops.items())),
            "trajectory_tokens": _spread(self.lengths),  # to choose compress.target_max_tokens
            "discarded": dict(sorted(self.filtered.items())),
            "discarded_no_reasoning": self.filtered["no_reasoning"],
            "errors": dict(sorted(self.errors.items())),
            "samples_per_prompt": int(settings.get("samples_per_prompt", 1) or 1),
            "verification": self.verification.build(int(settings.get("samples_per_prompt", 1) or 1),
                                                    str((settings.get("agent") or {}).get("kind", "model"))),
        }


def _rates(c: Counter) -> dict[str, Any]:
    count = c["count"]
    return {"count": count, "success": c["success"], "failure": c["failure"],
            "success_rate": round(100 * c["success"] / count, 2) if count else 0.0,
            "failure_rate": round(100 * c["failure"] / count, 2) if count else 0.0}


def _spread(values: list[int]) -> dict[str, int]:
    """p50, p90 (nearest rank) and max of the kept samples' lengths in tokens."""
    if not values:
        return {"p50": 0, "p90": 0, "max": 0}
    ordered = sorted(values)
    rank = lambda q: ordered[max(0, math.ceil(q * len(ordered)) - 1)]  # noqa: E731
    return {"p50": rank(0.5), "p90": rank(0.9), "max": ordered[-1]}


def _iso(ts: float) -> str | None:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds") if ts else None


def dumps(stats: dict[str, Any]) -> str:
    return json.dumps(stats, indent=2, sort_keys=False) + "\n"
