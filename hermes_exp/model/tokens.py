"""Token IDs and logprobs of each assistant turn (`model.logprobs`, `model.top_logprobs`, `model.token_ids`):
the request fields that ask an endpoint for them, named by `model.token_fields` (config, never the model's
name), and where its answer holds them. Off by default: then nothing is asked and nothing is kept."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hermes_exp.errors import ConfigError
from hermes_exp.settings.sections import Section

# The settings that ask for token data: part of a run's identity only when set (store/ keeps what they give).
ASKING = ("logprobs", "top_logprobs", "token_ids")
# How an endpoint is asked, and where its answer has them; vLLM's names (OpenAI's for logprobs).
DEFAULT_FIELDS = {
    "logprobs": "logprobs",               # request flag
    "top_logprobs": "top_logprobs",       # request field carrying model.top_logprobs
    "token_ids": "return_token_ids",      # request flag; null: the endpoint cannot return token IDs
    "completion_ids": "token_ids",        # the choice's field with the sampled IDs
    "prompt_ids": "prompt_token_ids",     # the response's field with the prompt's IDs
}
# What a saved assistant message carries (docs/outputs.md), each only when the server returned it.
MESSAGE_KEYS = ("logprobs", "token_ids", "prompt_token_ids")


@dataclass(frozen=True)
class TokenData:
    """What to ask an endpoint for, and how (config: `model.logprobs`, `top_logprobs`, `token_ids`,
    `token_fields`)."""

    logprobs: bool = False
    top_logprobs: int | None = None
    token_ids: bool = False
    fields: dict[str, str | None] = field(default_factory=lambda: dict(DEFAULT_FIELDS))

    @classmethod
    def from_config(cls, model: dict[str, Any]) -> TokenData:
        section = Section("model", {k: model.get(k) for k in ASKING})
        logprobs, token_ids = section.flag("logprobs", False), section.flag("token_ids", False)
        top = section.number("top_logprobs", low=0, integer=True)
        if top is not None and not logprobs:
            raise ConfigError(f"model.top_logprobs={top} needs model.logprobs=true",
                              "set model.logprobs=true, or model.top_logprobs=null")
        fields = _fields(model.get("token_fields"))
        for wanted, key, what in ((logprobs, "logprobs", "logprobs"), (top is not None, "top_logprobs", "top logprobs"),
                                  (token_ids, "token_ids", "token IDs")):
            if wanted and not fields[key]:
                raise ConfigError(f"model.{key} is set, but model.token_fields.{key} is null: this endpoint "
                                  f"cannot be asked for {what}",
                                  f"name the request field in model.token_fields.{key}, or set model.{key}="
                                  f"{'null' if key == 'top_logprobs' else 'false'}")
        return cls(logprobs, top, token_ids, fields)

    @property
    def wanted(self) -> bool:
        return self.logprobs or self.token_ids

    def request(self) -> dict[str, Any]:
        """The body fields that ask for them (none when nothing is asked)."""
        body: dict[str, Any] = {}
        if self.logprobs:
            body[str(self.fields["logprobs"])] = True
        if self.top_logprobs is not None:
            body[str(self.fields["top_logprobs"])] = self.top_logprobs
        if self.token_ids:
            body[str(self.fields["token_ids"])] = True
        return body

    def extract(self, response: dict[str, Any], choice: dict[str, Any]) -> dict[str, Any]:
        """The assistant message's token keys, as the server returned them; a key the server left out,
        null or empty is absent (never an empty list that a trainer would take for a turn of no tokens)."""
        found: dict[str, Any] = {}
        if self.logprobs and _present(choice.get("logprobs")):
            found["logprobs"] = choice["logprobs"]
        if self.token_ids:
            for key, value in (("token_ids", choice.get(self.fields["completion_ids"] or "")),
                               ("prompt_token_ids", response.get(self.fields["prompt_ids"] or ""))):
                if isinstance(value, list) and value:
                    found[key] = value
        return found


def _fields(raw: dict[str, Any] | None) -> dict[str, str | None]:
    section = Section("model.token_fields", raw).only(DEFAULT_FIELDS)
    fields = dict(DEFAULT_FIELDS)
    for key, value in section.raw.items():
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"model.token_fields.{key}={value!r} must be a field name",
                              f"set model.token_fields.{key}={DEFAULT_FIELDS[key]} (the endpoint's own name)")
        fields[key] = value
    return fields


def _present(logprobs: Any) -> bool:
    """OpenAI's shape ({"content": [...]}) with at least one token, or another non-empty object."""
    if not isinstance(logprobs, dict):
        return False
    if "content" in logprobs:
        return bool(logprobs["content"])
    return bool(logprobs)


def without_token_data(model: dict[str, Any]) -> dict[str, Any]:
    """`model` asking for no token data: a second client's calls (judge, vision, summaries) are not turns."""
    return {k: v for k, v in model.items() if k not in ASKING}

