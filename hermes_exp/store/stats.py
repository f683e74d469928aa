"""statistics.json: computed from the whole ledger (every invocation), never just the last one."""

from __future__ import annotations

import json
import math
from collections import Counter
from datetime import datetime, timezone
from typing import Any

from hermes_exp.errors import BROKEN
from hermes_exp.model.reasoning import has_reasoning
from hermes_exp.store.metrics import VerifyStats


def facts(result: dict[str, Any]) -> dict[str, Any]:
    """What statistics.json takes from one raw result (small, JSON: the export keeps it per task, so
    an unchanged task's result is not decoded again): completed, providers, tool calls per name
    (count, failures: the rule of sharegpt.count_calls), assistant turns and those with reasoning."""
    tools: dict[str, list[int]] = {}
    for call in result.get("tool_calls") or []:
        name = call.get("name")
        if isinstance(name, str):  # only a run's known tools (names) are counted
            entry = tools.setdefault(name, [0, 0])
            entry[0] += 1
            entry[1] += bool(call.get("failed"))
    assistant = [m for m in result.get("messages") or [] if m.get("role") == "assistant"]
    return {"completed": int(bool(result.get("completed"))),
            "served_by": [u["served_by"]["provider"] for u in result.get("usage", [])
                          if (u.get("served_by") or {}).get("provider")],
            "tools": tools, "turns": len(assistant), "reasoning_turns": sum(map(has_reasoning, assistant))}


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
        self.broken: list[dict[str, Any]] = []  # preflight=oracle's broken tasks: apart from failures

    def add(self, row: dict[str, Any], facts: dict[str, Any] | None, score: dict[str, Any] | None = None) -> None:
        """`facts`: what the statistics take from a kept task's raw result (`facts(result)`; None
        otherwise); `score`: the sample's score under the current verifier (None when not verified)."""
        self.verification.add(row, score)
        self.states[row["state"]] += 1
        for key in TOKEN_KEYS:
            self.tokens[key] += row.get(key) or 0
        self.api_calls += row.get("api_calls") or 0
        self.cost_usd += row.get("cost_usd") or 0.0
        self.spent_usd += row.get("spent_usd") or 0.0
        if row["state"] == "filtered":
            self.filtered[row["reason"] or "unknown"] += 1
        if row["state"] == "error" and row.get("error_class") == BROKEN:
            self.broken.append(broken_entry(row))
        elif row["state"] == "error":
            self.errors[row["error_class"] or "unknown"] += 1
        if row["state"] in ("done", "filtered") and row.get("stop_reason"):
            self.stops[row["stop_reason"]] += 1
        if row["state"] != "done" or facts is None:
            return
        if row.get("context_tokens"):
            self.lengths.append(row["context_tokens"])
        self.batches.add(row["batch_num"])
        self.completed += facts["completed"]
        self.served_by.update(facts["served_by"])
        self.last_finished = max(self.last_finished, row["finished_at"] or 0)
        for name, (count, failed) in facts["tools"].items():
            entry = self.tools.get(name)
            if entry is not None:  # a tool the run does not know (a hallucinated name) is not counted
                entry["count"] += count
                entry["failure"] += failed
                entry["success"] += count - failed
        self.reasoning["total_assistant_turns"] += facts["turns"]
        self.reasoning["turns_with_reasoning"] += facts["reasoning_turns"]

    def build(self, settings: dict[str, Any], invocations: list[dict[str, Any]],
              dataset_tasks: int | None = None) -> dict[str, Any]:
        """`dataset_tasks`: the valid prompts of the dataset as last read (the ledger only knows the
        tasks it has seen), so `pending` counts what is still to run. The keys keep their order:
        statistics.json is written as built."""
        samples = int(settings.get("samples_per_prompt", 1) or 1)
        return {
            "run_name": settings["run_name"],
            "distribution": settings["distribution"]["name"],
            "model": settings["model"]["name"],
            **self._counts(dataset_tasks),
            "batch_size": settings["batch_size"],
            **self._timing(invocations),
            **self._usage(),
            **self._outcomes(),
            "samples_per_prompt": samples,
            "verification": self.verification.build(samples,
                                                    str((settings.get("agent") or {}).get("kind", "model"))),
        }

    def _counts(self, dataset_tasks: int | None) -> dict[str, Any]:
        """How many tasks there are and where each stands."""
        total = max(dataset_tasks or 0, sum(self.states.values()))
        return {
            "total_prompts": total,
            "pending": total - self.states["done"] - self.states["filtered"] - self.states["error"],
            "kept": self.states["done"],
            "filtered": self.states["filtered"],
            "failed": self.states["error"] - len(self.broken),
            "broken": len(self.broken),  # environments preflight=oracle found broken: no agent's zero
            "completed_trajectories": self.completed,
            "total_batches": len(self.batches),
        }

    def _timing(self, invocations: list[dict[str, Any]]) -> dict[str, Any]:
        """When the last kept task finished, and the time spent by the invocations that ran tasks."""
        ran = [i for i in invocations if i.get("tasks_run")]
        duration = sum((i["finished_at"] or i["started_at"]) - i["started_at"] for i in ran)
        return {"completed_at": _iso(self.last_finished), "duration_seconds": round(duration, 3),
                "invocations": len(ran)}

    def _usage(self) -> dict[str, Any]:
        """Calls, tokens, money and providers."""
        return {
            "api_calls": self.api_calls,
            "tokens": dict(self.tokens),
            # share of prompt tokens read from the provider's cache (model.cache_control)
            "cache_hit_share": round(self.tokens["cached_tokens"] / self.tokens["prompt_tokens"], 4)
            if self.tokens["prompt_tokens"] else 0.0,
            "cost_usd": round(self.cost_usd, 8),
            "spent_usd": round(self.spent_usd, 8),
            "served_by": dict(sorted(self.served_by.items())),
        }

    def _outcomes(self) -> dict[str, Any]:
        """Tools, reasoning, why trajectories stopped, and why tasks were discarded or failed."""
        turns = self.reasoning["total_assistant_turns"]
        with_r = self.reasoning["turns_with_reasoning"]
        return {
            "tool_statistics": {name: _rates(c) for name, c in self.tools.items()},
            "reasoning_statistics": {"total_assistant_turns": turns, "turns_with_reasoning": with_r,
                                     "turns_without_reasoning": turns - with_r,
                                     "coverage_percent": round(100 * with_r / turns, 2) if turns else 0.0},
            # Hermes's key, where Hermes writes it: samples dropped for no reasoning in any turn (of the
            # whole run), not counted in tool_statistics or reasoning_statistics, as in Hermes
            "discarded_no_reasoning": self.filtered["no_reasoning"],
            "stop_reasons": dict(sorted(self.stops.items())),
            "trajectory_tokens": _spread(self.lengths),  # to choose compress.target_max_tokens
            "discarded": dict(sorted(self.filtered.items())),
            "errors": dict(sorted(self.errors.items())),
            "broken_tasks": self.broken[:MAX_BROKEN_LISTED],
        }


MAX_BROKEN_LISTED = 100
BROKEN_TAIL = 600  # characters of the verifier's output per listed broken task (the ledger keeps more)


def broken_entry(row: dict[str, Any]) -> dict[str, Any]:
    """A broken task as statistics.json lists it: where it is, why, and the end of its verifier's output."""
    why, _, tail = (row.get("error") or "").partition("\n")
    return {"prompt_index": row["prompt_index"], "line": row["prompt_index"] + 1, "sample": row.get("sample") or 0,
            "why": why, "tail": tail[-BROKEN_TAIL:]}


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
