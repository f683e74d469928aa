"""Quality filters: pure functions of a finished task's raw result, applied in the parent.

Each returns None to keep the sample or a short reason to drop it. Config lists them by `_target_`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from hermes_exp.model.reasoning import has_reasoning
from hermes_exp.stops import Stop
from hermes_exp.settings.instantiation import construct

log = logging.getLogger(__name__)
Filter = Callable[[dict[str, Any]], "str | None"]


def _assistant(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in result.get("messages", []) if m.get("role") == "assistant"]


# What the control agents (agent=oracle|nop) end with: their turns are not a model's, so they carry no reasoning.
CONTROL_STOPS = (Stop.NOP, Stop.ORACLE_RAN, Stop.ORACLE_NO_SOLUTION)


class NoReasoning:
    """Drop samples in which no assistant turn carries reasoning (native or inline); a control run's
    samples (agent=oracle|nop) are not model output and pass."""

    def __call__(self, result: dict[str, Any]) -> str | None:
        if result.get("stop_reason") in CONTROL_STOPS:
            return None
        turns = _assistant(result)
        return None if any(has_reasoning(m) for m in turns) else "no_reasoning"


class HallucinatedTools:
    """Drop samples that call a tool that was not offered."""

    def __call__(self, result: dict[str, Any]) -> str | None:
        offered = set(result.get("tools_offered", []))
        for message in _assistant(result):
            for call in message.get("tool_calls") or []:
                if (call.get("function") or {}).get("name") not in offered:
                    return "hallucinated_tools"
        return None


class Incomplete:
    """Drop samples that ended without a final answer (max_turns, truncation, invalid calls)."""

    def __call__(self, result: dict[str, Any]) -> str | None:
        return None if result.get("completed") and not result.get("partial") else "incomplete"


class MinToolCalls:
    """Drop samples with fewer than `minimum` tool calls."""

    def __init__(self, minimum: int = 1) -> None:
        self.minimum = int(minimum)

    def __call__(self, result: dict[str, Any]) -> str | None:
        return None if len(result.get("tool_calls", [])) >= self.minimum else "too_few_tool_calls"


class ToolErrors:
    """Drop samples in which more than `max_failures` tool calls failed."""

    def __init__(self, max_failures: int = 0) -> None:
        self.max_failures = int(max_failures)

    def __call__(self, result: dict[str, Any]) -> str | None:
        failures = sum(1 for c in result.get("tool_calls", []) if c.get("failed"))
        return None if failures <= self.max_failures else "tool_errors"


class Verified:
    """Keep only samples their verifier passed (a sample without a score is dropped too, and one whose
    verification shows an infrastructure failure: verifier_suspect)."""

    def __call__(self, result: dict[str, Any]) -> str | None:
        score = result.get("score") or {}
        if score.get("suspect"):
            return "verifier_suspect"
        if score.get("passed"):
            return None
        return "not_passed" if score.get("passed") is False else "not_verified"


def warn_if_nothing_verifies(settings: dict[str, Any]) -> None:
    """filters=verified with verifier=none keeps only rows that name their own verifier: said once at
    start-up, before the run pays for samples that will all be filtered as not_verified."""
    verified = any(isinstance(rule, Verified) for rule in build(settings.get("filters")))
    if verified and str((settings.get("verifier") or {}).get("kind", "none")) == "none":
        log.warning("the filters keep only samples a verifier passed (filters.rules: Verified), and verifier=none: "
                    "only rows that name their own \"verifier\" can be kept, every other sample is filtered as "
                    "not_verified. Choose a verifier (verifier=answer|checks|command|judge) or filters=default; "
                    "`action=export filters=default` re-exports finished samples without a model call")


def build(filters_cfg: dict[str, Any] | None) -> list[Filter]:
    rules = (filters_cfg or {}).get("rules") or []
    return [construct(rule, f"filters.rules[{i}]") for i, rule in enumerate(rules)]


def first_reason(filters: list[Filter], result: dict[str, Any]) -> str | None:
    for rule in filters:
        reason = rule(result)
        if reason:
            return reason
    return None
