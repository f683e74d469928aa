"""Tokens and dollars of a model call: usage normalised across providers; cost from the provider's own
accounting (`usage.cost`, as OpenRouter reports it) or else from the model's per-million-token prices."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hermes_exp.errors import ConfigError

CHARS_PER_TOKEN = 3.0  # deliberately low (real text runs ~4): the estimate is a worst case


@dataclass(frozen=True)
class Pricing:
    """USD per 1M tokens. `cached_prompt` prices prompt tokens served from the provider's cache."""

    prompt: float
    completion: float
    cached_prompt: float | None = None

    @classmethod
    def from_config(cls, raw: dict[str, Any] | None) -> Pricing | None:
        """None when the config gives no prices (then only a provider-reported cost is known)."""
        if not raw or all(raw.get(k) is None for k in ("prompt", "completion")):
            return None
        for key in ("prompt", "completion", "cached_prompt"):
            value = raw.get(key)
            if key != "cached_prompt" and value is None:
                raise ConfigError(f"model.pricing.{key} is null while the other price is set",
                                  "set both model.pricing.prompt and model.pricing.completion (USD per 1M tokens)")
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
                raise ConfigError(f"model.pricing.{key}={value!r} must be a number >= 0 (USD per 1M tokens)",
                                  f"set model.pricing.{key}=<USD per 1M tokens>")
        unknown = set(raw) - {"prompt", "completion", "cached_prompt"}
        if unknown:
            raise ConfigError(f"model.pricing has unknown keys: {', '.join(sorted(unknown))}",
                              "use prompt, completion and cached_prompt (USD per 1M tokens)")
        cached = raw.get("cached_prompt")
        return cls(float(raw["prompt"]), float(raw["completion"]), None if cached is None else float(cached))

    def cost(self, prompt: int, completion: int, cached: int = 0) -> float:
        cached = min(cached, prompt) if self.cached_prompt is not None else 0
        return ((prompt - cached) * self.prompt + cached * (self.cached_prompt or 0.0)
                + completion * self.completion) / 1e6


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage_facts(raw: dict[str, Any], pricing: Pricing | None) -> dict[str, Any]:
    """The usage as received, plus normalised `reasoning_tokens`, `cached_tokens` and `cost_usd`
    (with `cost_source`: "provider" when the response said what it cost, else "pricing")."""
    usage = dict(raw)
    completion_details = raw.get("completion_tokens_details") or {}
    prompt_details = raw.get("prompt_tokens_details") or {}
    usage["reasoning_tokens"] = _int(completion_details.get("reasoning_tokens"))
    usage["cached_tokens"] = _int(prompt_details.get("cached_tokens"))
    reported = raw.get("cost")
    if isinstance(reported, (int, float)) and not isinstance(reported, bool):
        usage["cost_usd"], usage["cost_source"] = float(reported), "provider"
    elif pricing is not None:
        usage["cost_usd"] = pricing.cost(_int(raw.get("prompt_tokens")), _int(raw.get("completion_tokens")),
                                         usage["cached_tokens"])
        usage["cost_source"] = "pricing"
    else:
        usage["cost_usd"], usage["cost_source"] = 0.0, "unknown"
    return usage


def estimate_prompt_tokens(body: dict[str, Any]) -> int:
    """An over-estimate of a request's prompt tokens from the size of its messages and tools."""
    size = len(json.dumps(body.get("messages") or [], ensure_ascii=False))
    size += len(json.dumps(body.get("tools") or [], ensure_ascii=False))
    return int(size / CHARS_PER_TOKEN) + 1


def worst_case(pricing: Pricing | None, prompt_tokens: int, completion_tokens: int) -> float:
    """The most a call can cost: every prompt token uncached, every allowed completion token used."""
    return pricing.cost(prompt_tokens, completion_tokens) if pricing is not None else 0.0
