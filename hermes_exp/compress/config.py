"""The `compress.*` settings, validated, and the digest that names one compression result."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from hermes_exp.settings.sections import Section
from hermes_exp.errors import ConfigError

VERSION = 1  # bump when planning or assembly changes what a compression produces
# The parts of the summariser's config that change what it writes (not its endpoint, retries or prices).
_MODEL_KEYS = ("name", "sampling", "reasoning", "extra_body")
KEYS = ("tokenizer", "target_max_tokens", "summary_target_tokens", "keep_last_turns", "keep_over_limit",
        "summary_notice", "model")


@dataclass(frozen=True)
class CompressSettings:
    tokenizer: str | None
    target_max_tokens: int
    summary_target_tokens: int
    keep_last_turns: int
    keep_over_limit: bool
    summary_notice: str | None
    model: dict[str, Any]

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> CompressSettings:
        section = Section("compress", settings.get("compress")).only(KEYS)
        raw = section.raw
        for key, low in {"target_max_tokens": 1, "summary_target_tokens": 1, "keep_last_turns": 0}.items():
            section.number(key, low=low, integer=True, required=True, fix=f"set compress.{key}=<n>")
        if raw["summary_target_tokens"] >= raw["target_max_tokens"]:
            raise ConfigError(f"compress.summary_target_tokens={raw['summary_target_tokens']} must be below "
                              f"compress.target_max_tokens={raw['target_max_tokens']}",
                              "a summary must leave room for the turns it does not replace")
        section.flag("keep_over_limit", nullable=False, required=True,
                     fix="set compress.keep_over_limit=false (drop rows still over the target) or true")
        model = _merged(settings["model"], raw.get("model") or {})
        return cls(raw.get("tokenizer"), raw["target_max_tokens"], raw["summary_target_tokens"],
                   raw["keep_last_turns"], raw["keep_over_limit"], raw.get("summary_notice") or None, model)

    def summariser_model(self) -> dict[str, Any]:
        """The summariser's model config, its completion capped at twice the summary target."""
        sampling = {**(self.model.get("sampling") or {}), "max_tokens": 2 * self.summary_target_tokens}
        return {**self.model, "sampling": sampling}

    def stamp(self, tokenizer_id: str) -> str:
        """What a compression result depends on besides the row itself (keep_over_limit only decides
        which results are written, so it is not part of it)."""
        used = {"version": VERSION, "tokenizer": tokenizer_id, "target": self.target_max_tokens,
                "summary": self.summary_target_tokens, "keep_last": self.keep_last_turns,
                "notice": self.summary_notice,
                "model": {k: self.summariser_model().get(k) for k in _MODEL_KEYS}}
        return json.dumps(used, sort_keys=True, separators=(",", ":"), default=str)


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def digest(stamp: str, turns: list[dict[str, str]]) -> str:
    body = stamp + "\n" + json.dumps(turns, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "b2:" + hashlib.blake2b(body.encode(), digest_size=16).hexdigest()
