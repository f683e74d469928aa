"""Anthropic prompt-caching breakpoints (`model.cache_control`): `cache_control` markers on the system
prompt and the last turns, as content parts, which OpenRouter and Anthropic-compatible endpoints read.
Only the request is marked; the saved conversation stays as the model saw it (plain content)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hermes_exp.settings.sections import Section

MAX_BREAKPOINTS = 4  # Anthropic's limit per request
TTLS = ("5m", "1h")


@dataclass(frozen=True)
class CacheControl:
    last_turns: int = 3      # breakpoints on the last turns that can carry one (besides the system prompt)
    ttl: str | None = None   # null: the provider's default (5 minutes)

    @classmethod
    def from_config(cls, raw: dict[str, Any] | None) -> CacheControl | None:
        """None when caching is off (the default; the Claude presets turn it on)."""
        section = Section("model.cache_control", raw).only(("enabled", "last_turns", "ttl"),
                                                           "use enabled, last_turns and ttl")
        enabled = section.flag("enabled", False, nullable=False,
                               fix="set model.cache_control.enabled=true (Anthropic models) or false")
        turns = section.number("last_turns", cls.last_turns, 0, MAX_BREAKPOINTS - 1, integer=True,
                               fix=f"Anthropic allows {MAX_BREAKPOINTS} breakpoints, one of them on the system "
                                   "prompt: set model.cache_control.last_turns=3 or less")
        ttl = section.choice("ttl", TTLS, fix="set model.cache_control.ttl=5m, 1h, or null for the provider's default")
        return cls(turns, ttl) if enabled else None

    def marker(self) -> dict[str, str]:
        return {"type": "ephemeral", **({"ttl": self.ttl} if self.ttl else {})}

    def mark(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A copy of `messages` with breakpoints on the system prompt and the last `last_turns` messages
        that have content (a marker on an empty message is ignored by the provider: a wasted breakpoint)."""
        carriers = [i for i, m in enumerate(messages) if m.get("role") != "system" and _has_content(m)]
        chosen = set(carriers[len(carriers) - self.last_turns:] if self.last_turns else [])
        if messages and messages[0].get("role") == "system" and _has_content(messages[0]):
            chosen.add(0)
        return [_marked(m, self.marker()) if i in chosen else m for i, m in enumerate(messages)]


def _has_content(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return bool(content) and (isinstance(content, str) or isinstance(content[-1], dict))


def _marked(message: dict[str, Any], marker: dict[str, str]) -> dict[str, Any]:
    content = message["content"]
    if isinstance(content, str):
        parts = [{"type": "text", "text": content, "cache_control": marker}]
    else:
        parts = [*content[:-1], {**content[-1], "cache_control": marker}]
    return {**message, "content": parts}
