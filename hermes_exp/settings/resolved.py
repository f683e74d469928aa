"""The resolved run config as plain data, its identity hash, the prefill messages and the API key it names
(the start-up checks are in run/checks.py)."""

from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from hermes_exp.settings.canonical import canonical_json
from hermes_exp.errors import ConfigError, MissingApiKeyError

FORMAT_VERSION = 1
DEFAULT_TOOL_NAMES = "hermes"  # tools.names (tools/names.py): unset or this, it leaves identities as they were
# Config that changes what a run produces. Everything else (workers, batch size, paths, retry
# counts, progress, key names, endpoints) may change between invocations of one run.
IDENTITY_KEYS = ["model", "provider", "distribution", "sandbox", "max_turns", "system_prompt",
                 "ephemeral_system_prompt", "prefill_messages", "seed", "tools", "toolsets"]
# Inside `toolsets`, at any depth: where a backend is and how it is reached, not what it does.
TOOLSET_NOT_IDENTITY = {"url", "base_url", "api_key_env", "timeout", "description"}
NOT_IDENTITY = {
    "model": ["api_key_env", "base_url", "timeout", "retry", "rate_limit", "pricing", "mock_server.latency_ms",
              "mock_server.fail_rate", "mock_server.faults", "mock_server.usage_cost", "mock_server.provider_name", "cache_control",
              "mock_server.summary_chars"],
    "provider": ["api_key_env", "base_url", "headers"],
    "sandbox": ["_target_", "root", "keep", "max_sandboxes", "pull_timeout", "output_limit", "max_builds", "rebuild",
                "max_starts_per_second", "warm_pool", "remove_in_background", "runtime"],
    "distribution": ["description"],
}
# model.logprobs, top_logprobs, token_ids (model/tokens.py): in an identity only when set, so a run (and a
# judge on the run's model) that asks for no token data keeps the identity it had before they existed; the
# field names they are asked under are how an endpoint is reached, never part of one
UNSET_NOT_IDENTITY = ("logprobs", "top_logprobs", "token_ids")


def without_unasked_tokens(model: dict[str, Any]) -> dict[str, Any]:
    """`model` as an identity holds it: the token-data settings only where they ask for something."""
    return {k: v for k, v in model.items()
            if k != "token_fields" and not (k in UNSET_NOT_IDENTITY and (v is None or v is False))}


def to_plain(cfg: DictConfig) -> dict[str, Any]:
    """Resolve interpolations into a plain dict (no Hydra node survives into workers)."""
    plain = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    plain.pop("hydra", None)
    return plain


def _drop(tree: dict[str, Any], dotted: str) -> None:
    *parents, leaf = dotted.split(".")
    for part in parents:
        tree = tree.get(part)
        if not isinstance(tree, dict):
            return
    tree.pop(leaf, None)


def _without_keys(tree: Any, keys: set[str]) -> Any:
    if isinstance(tree, dict):
        return {k: _without_keys(v, keys) for k, v in tree.items() if k not in keys}
    if isinstance(tree, list):
        return [_without_keys(v, keys) for v in tree]
    return tree


def identity_config(settings: dict[str, Any]) -> dict[str, Any]:
    """The part of the settings that decides results (with the prefill file's content, not path)."""
    ident = {key: copy.deepcopy(settings.get(key)) for key in IDENTITY_KEYS}
    for group, keys in NOT_IDENTITY.items():
        for dotted in keys:
            if isinstance(ident.get(group), dict):
                _drop(ident[group], dotted)
    if isinstance(ident.get("model"), dict):
        ident["model"] = without_unasked_tokens(ident["model"])
    ident["toolsets"] = _without_keys(ident.get("toolsets") or {}, TOOLSET_NOT_IDENTITY)
    if isinstance(ident.get("tools"), dict) and ident["tools"].get("names") in (None, DEFAULT_TOOL_NAMES):
        ident["tools"].pop("names", None)  # runs made before tool-name sets existed keep their identity
    ident["prefill_messages"] = load_prefill(settings.get("prefill_messages"))
    limits = settings.get("limits") or {}
    if any(v is not None for v in limits.values()):  # unset limits leave earlier runs' identities as they were
        ident["limits"] = copy.deepcopy(limits)
    if (settings.get("agent") or {}).get("kind", "model") != "model":
        ident["agent"] = copy.deepcopy(settings["agent"])  # control runs (oracle, nop) never mix with model runs
    ident["format_version"] = FORMAT_VERSION
    return ident


# Sent at call time but never saved: the ledger keeps their digest, which still tells experiments apart.
NEVER_SAVED = ("ephemeral_system_prompt", "prefill_messages")


def stored_identity(settings: dict[str, Any]) -> dict[str, Any]:
    """identity_config as written to the ledger: the never-saved parts only as digests."""
    ident = identity_config(settings)
    for key in NEVER_SAVED:
        if ident.get(key):
            digest = hashlib.blake2b(canonical_json(ident[key]).encode(), digest_size=12).hexdigest()
            ident[key] = {"blake2b": digest}
    return ident


def identity_hash(settings: dict[str, Any]) -> str:
    digest = hashlib.blake2b(canonical_json(identity_config(settings)).encode(), digest_size=12)
    return f"id1:{digest.hexdigest()}"


def load_prefill(path: str | None) -> list[dict[str, Any]]:
    """Messages prepended at call time (a JSON list or JSONL of {role, content}); never saved."""
    if not path:
        return []
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(f"prefill_messages: file not found: {p}", "set prefill_messages to a JSON file or null")
    text = p.read_text(encoding="utf-8")
    try:
        data = json.loads(text) if text.lstrip().startswith("[") else [json.loads(x) for x in text.splitlines() if x.strip()]
    except json.JSONDecodeError as exc:
        raise ConfigError(f"prefill_messages: {p} is not JSON ({exc.msg}, line {exc.lineno})",
                          "write a JSON list of {\"role\": ..., \"content\": ...} objects") from exc
    if not all(isinstance(m, dict) and m.get("role") in {"system", "user", "assistant"} for m in data):
        raise ConfigError(f"prefill_messages: {p} must hold messages with role system, user or assistant",
                          "write a JSON list of {\"role\": ..., \"content\": ...} objects")
    return data


def api_key(settings: dict[str, Any]) -> str:
    """The API key, read from the environment variable the config names (never from config)."""
    var = (settings.get("provider") or {}).get("api_key_env")
    if not var:
        return "not-needed"
    value = os.environ.get(var, "")
    if not value:
        model = (settings.get("model") or {}).get("name", "?")
        raise MissingApiKeyError(
            f"the API key for model {model!r} is read from the environment variable {var}, which is not set",
            f"export {var}=... (the key never goes into config files), or run offline with model=mock")
    return value
