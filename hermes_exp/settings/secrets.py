"""Refuse a secret given as a config value, before anything is written. hermes-exp reads keys only from
environment variables the config names (`api_key_env`), so a key typed as a value is never used, but it
would be saved: in the config snapshot, the ledger's identity, a sweep's job directory name and
multirun.yaml. `+model.api_key=sk-...` is a habit from other tools; `provider.api_key_env=sk-...` is the
key pasted where its variable's name goes. Each error names the key and never shows the value.

Checked three times: the command line's overrides before Hydra starts (a sweep's directories and
multirun.yaml are named and written before any job runs), a sweep's composed config before Hydra's sweeper
saves it (`SweepGuard`, a Hydra callback: a key in a config file), and the settings at the start of
each run (config files, single runs).
`sandbox.env` is left alone: its values are meant literally (extra variables for tool commands)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from hydra.experimental.callback import Callback  # Hydra's documented base: every other hook a no-op

from hermes_exp.errors import ConfigError

# Config keys whose value would be a secret itself (compared lower-case, whole key).
SECRET_KEYS = frozenset({"api_key", "apikey", "api-key", "x-api-key", "key_value", "token", "access_token",
                         "auth_token", "bearer_token", "secret", "client_secret", "secret_key", "password",
                         "authorization"})
# Mappings whose values are NAMES of environment variables (mcp.servers.<name>.env / headers_env).
NAME_MAPS = frozenset({"env", "headers_env"})
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Well-known API key formats, matched against a whole value (a path that merely contains "sk-" is fine).
KEY_FORMATS = re.compile(
    r"(?:Bearer\s+\S{16,}|sk-[A-Za-z0-9_-]{20,}|AIza[0-9A-Za-z_-]{30,}|hf_[A-Za-z0-9]{30,}|gsk_[A-Za-z0-9]{30,}"
    r"|xai-[A-Za-z0-9]{30,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|r8_[A-Za-z0-9]{30,})")
LITERAL_ALLOWED = ("sandbox.env",)  # literal values by design
FIX = ("put the key in an environment variable and name the variable instead, e.g. "
       "`export OPENAI_API_KEY=...` and provider.api_key_env=OPENAI_API_KEY; an MCP server's header or variable: "
       "mcp.servers.<name>.headers_env / env map it to the variable's NAME (keys never go into configs)")


def check_overrides(args: list[str]) -> None:
    """The command line's overrides (what Hydra would parse); a line Hydra cannot parse is left to it."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    overrides = [a for a in args if not a.startswith("-")]
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception:  # Hydra reports its own syntax errors, with its own message
        return
    for override in parsed:
        if override.is_delete():
            continue
        values = list(override.sweep_iterator()) if override.is_sweep_override() else [override.value()]
        for value in values:
            check_value(override.key_or_group, value)


class SweepGuard(Callback):
    """Hydra callback (`hydra.callbacks.secret_guard`): a sweep's whole config, before multirun.yaml."""

    def on_multirun_start(self, config: Any, **_: Any) -> None:
        from omegaconf import OmegaConf

        settings = OmegaConf.to_container(config, resolve=False)
        settings.pop("hydra", None)
        try:
            check_settings(settings)
        except ConfigError as exc:  # Hydra would print a traceback of its own callback machinery
            import sys

            print(f"error: {exc}", file=sys.stderr)
            raise SystemExit(exc.exit_code) from None


def check_settings(settings: dict[str, Any]) -> None:
    for key, value in settings.items():
        check_value(str(key), value)


def check_value(path: str, value: Any) -> None:
    """Raise ConfigError for the first secret-looking value under `path` (a dotted config key)."""
    for where, leaf, parent in _leaves(path, value):
        if any(where == p or where.startswith(p + ".") for p in LITERAL_ALLOWED) or not isinstance(leaf, str) or not leaf:
            continue
        name = where.rsplit(".", 1)[-1]
        if KEY_FORMATS.fullmatch(leaf.strip()):
            raise ConfigError(f"{where} holds what looks like an API key (not shown): hermes-exp would save it "
                              "with the run's config", FIX)
        if name.endswith("_env") or parent in NAME_MAPS:
            if not ENV_NAME.fullmatch(leaf):
                raise ConfigError(f"{where} must be the NAME of an environment variable (letters, digits and _), "
                                  "and its value is not one: it looks like the secret itself (not shown)", FIX)
        elif name.lower() in SECRET_KEYS:
            raise ConfigError(f"{where} holds a secret as a config value (not shown): hermes-exp never reads it "
                              "there, and would save it with the run's config", FIX)


def _leaves(path: str, value: Any, parent: str = "") -> Iterator[tuple[str, Any, str]]:
    """(dotted path, value, the name of the mapping that holds it) of every leaf under `value`."""
    if isinstance(value, dict):
        name = path.rsplit(".", 1)[-1]
        for key, item in value.items():
            yield from _leaves(f"{path}.{key}", item, name)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _leaves(f"{path}[{i}]", item, parent)
    else:
        yield path, value, parent or (path.rsplit(".", 2)[-2] if path.count(".") else "")
