"""Per-task limits (`limits.task_seconds`, `limits.task_tokens`) and the context-overflow stop: a sample
that reaches one ends settled with its stop reason (never an error retried forever)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from hermes_exp.settings.sections import Section
from hermes_exp.errors import ProviderError
from hermes_exp.stops import Stop

# What providers say when the prompt does not fit the model's context (OpenAI, Anthropic, OpenRouter,
# vLLM, llama.cpp); only on a 400/413, never on a transient status.
_OVERFLOW = re.compile(r"context[ _]length|maximum context|context window|prompt is too long|too many tokens|"
                       r"exceeds the (?:model'?s? )?(?:maximum|context)|n_ctx", re.IGNORECASE)


def is_context_overflow(exc: ProviderError) -> bool:
    return getattr(exc, "status", None) in (400, 413) and bool(_OVERFLOW.search(str(exc)))


@dataclass(frozen=True)
class TaskLimits:
    seconds: float | None = None
    tokens: int | None = None

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> TaskLimits:
        section = Section("limits", settings.get("limits"), null="for no limit")
        section.only(("task_seconds", "task_tokens"), "use task_seconds, task_tokens")
        return cls(section.number("task_seconds", positive=True),
                   section.number("task_tokens", positive=True, integer=True))

    def reached(self, started: float, usage: list[dict[str, Any]]) -> Stop | None:
        """The stop reason of a limit this sample has reached, else None (checked between turns)."""
        if self.seconds is not None and time.monotonic() - started >= self.seconds:
            return Stop.TASK_SECONDS
        if self.tokens is not None and tokens_used(usage) >= self.tokens:
            return Stop.TASK_TOKENS
        return None


def tokens_used(usage: list[dict[str, Any]]) -> int:
    return sum((u.get("prompt_tokens") or 0) + (u.get("completion_tokens") or 0) for u in usage)


def for_row(settings: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """The settings one task runs with: a row's own `limits` (a Harbor task's [agent].timeout_sec)
    narrow the run's limits; of two values the tighter one applies."""
    own = row.get("limits")
    if not isinstance(own, dict) or not own:
        return settings
    merged = dict(settings.get("limits") or {})
    for key, value in own.items():
        current = merged.get(key)
        merged[key] = value if current is None or value is None else min(current, value)
    return {**settings, "limits": merged}
