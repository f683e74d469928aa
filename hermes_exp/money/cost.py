"""Tokens and dollars of a model call: usage normalised across providers; cost from the provider's own
accounting (`usage.cost`, as OpenRouter reports it) or else from the model's per-million-token prices."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hermes_exp.settings.sections import Section
from hermes_exp.errors import ConfigError

_OPTIONAL = ("cached_prompt", "cache_write")
CHARS_PER_TOKEN = 3.0  # deliberately low (real text runs ~4): the estimate is a worst case


@dataclass(frozen=True)
class Pricing:
    """USD per 1M tokens. `cached_prompt` prices prompt tokens served from the provider's cache,
    `cache_write` prompt tokens written to it (Anthropic bills them above the prompt price)."""

    prompt: float
    completion: float
    cached_prompt: float | None = None
    cache_write: float | None = None

    @classmethod
    def from_config(cls, raw: dict[str, Any] | None) -> Pricing | None:
        """None when the config gives no prices (then only a provider-reported cost is known)."""
        if not raw or all(raw.get(k) is None for k in ("prompt", "completion")):
            return None
        section = Section("model.pricing", raw)
        for key in ("prompt", "completion"):
            if raw.get(key) is None:
                raise ConfigError(f"model.pricing.{key} is null while the other price is set",
                                  "set both model.pricing.prompt and model.pricing.completion (USD per 1M tokens)")
        unit = "USD per 1M tokens"
        prices = {key: section.number(key, low=0, unit=unit, fix=f"set model.pricing.{key}=<{unit}>")
                  for key in ("prompt", "completion", *_OPTIONAL)}
        section.only(prices, "use prompt, completion, cached_prompt and cache_write (USD per 1M tokens)")
        return cls(**{k: None if v is None else float(v) for k, v in prices.items()})

    def cost(self, prompt: int, completion: int, cached: int = 0, written: int = 0) -> float:
        """`prompt` counts every prompt token, `cached` (read from the cache) and `written` included."""
        cached = min(cached, prompt) if self.cached_prompt is not None else 0
        written = min(written, prompt - cached) if self.cache_write is not None else 0
        return ((prompt - cached - written) * self.prompt + cached * (self.cached_prompt or 0.0)
                + written * (self.cache_write or 0.0) + completion * self.completion) / 1e6


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
    # OpenRouter's name for prompt tokens written to the cache, else Anthropic's
    usage["cache_write_tokens"] = _int(prompt_details.get("cache_write_tokens")) or _int(
        raw.get("cache_creation_input_tokens"))
    reported = raw.get("cost")
    if isinstance(reported, (int, float)) and not isinstance(reported, bool):
        usage["cost_usd"], usage["cost_source"] = float(reported), "provider"
    elif pricing is not None:
        usage["cost_usd"] = pricing.cost(_int(raw.get("prompt_tokens")), _int(raw.get("completion_tokens")),
                                         usage["cached_tokens"], usage["cache_write_tokens"])
        usage["cost_source"] = "pricing"
    else:
        usage["cost_usd"], usage["cost_source"] = 0.0, "unknown"
    return usage


def estimate_prompt_tokens(body: dict[str, Any]) -> int:
    """An over-estimate of a request's prompt tokens from the size of its messages and tools: ASCII at
    CHARS_PER_TOKEN, and every UTF-8 byte of other text as a token of its own (a byte-level tokenizer
    never needs more; CJK runs 1-2 tokens a character, 3 bytes each). The model client computes the
    same from the pieces of the body it sends (model/encode.py)."""
    ascii_chars, other_bytes = text_sizes(json.dumps(body.get("messages") or [], ensure_ascii=False))
    tool_ascii, tool_other = text_sizes(json.dumps(body.get("tools") or [], ensure_ascii=False))
    return tokens_from_sizes(ascii_chars + tool_ascii, other_bytes + tool_other)


def tokens_from_sizes(ascii_chars: int, other_bytes: int) -> int:
    return int(ascii_chars / CHARS_PER_TOKEN) + other_bytes + 1


def text_sizes(text: str) -> tuple[int, int]:
    """(ASCII characters, UTF-8 bytes of the other characters) of `text`."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    return ascii_chars, len(text.encode("utf-8", "surrogatepass")) - ascii_chars


def worst_case(pricing: Pricing | None, prompt_tokens: int, completion_tokens: int) -> float:
    """The most a call can cost: every prompt token uncached, every allowed completion token used."""
    return pricing.cost(prompt_tokens, completion_tokens) if pricing is not None else 0.0
