"""Which verifier judges a sample: the run's `verifier` config, unless the dataset row names its own
(`"verifier": "answer"` or `{"kind": "answer", "match": "numeric"}`), which wins. Each option of
`conf/verifier/` is loaded once per run; the effective config of a sample hashes to its verifier
identity, the second half of a score's key (scores are never part of the run identity)."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import OmegaConf

from hermes_exp.dataset.tasks import canonical_json
from hermes_exp.errors import ConfigError
from hermes_exp.verify import options, preset
from hermes_exp.verify.base import Verifier, VerifyContext

NONE = "none"
# Keys that change how a verification runs, not what it concludes.
NOT_IDENTITY = ("keep_workdir", "archive_on_error", "archive_max_mb", "timeout_seconds", "details_chars",
                "description", *preset.KEYS,  # a preset's model and provider are
                "infra_patterns", "infra_exit_codes")  # mark a score suspect, never change its reward
# Row fields that override the verifier option of the same name (e.g. a row's own "match").
ROW_OPTION_NAMES = ("match", "case_sensitive", "normalize_whitespace", "rel_tol", "abs_tol")
# the judge never asks for token data (model/clients.py), so the run's model's token settings are not its
JUDGE_MODEL_NOT_IDENTITY = ("api_key_env", "base_url", "timeout", "retry", "rate_limit", "pricing", "mock_server",
                            "logprobs", "top_logprobs", "token_ids", "token_fields")


def load_options(settings: dict[str, Any], conf_dir: Path) -> dict[str, dict[str, Any]]:
    """name -> resolved config of every conf/verifier option; the run's own choice keeps its overrides."""
    chosen = settings.get("verifier") or {"kind": NONE}
    options: dict[str, dict[str, Any]] = {}
    # Interpolations such as ${model} resolve against the run's settings: each option in turn is set as
    # `verifier` of one copy of them (a copy per option was most of a no-op invocation's config work).
    paths = sorted((conf_dir / "verifier").glob("*.yaml"))
    root = OmegaConf.create(_reachable(settings, [path.read_text(encoding="utf-8") for path in paths]))
    for path in paths:
        root.verifier = OmegaConf.load(path)
        options[path.stem] = OmegaConf.to_container(root.verifier, resolve=True)
    options[str(chosen.get("kind", NONE))] = copy.deepcopy(chosen)
    return {name: preset.resolve(option, settings) if option.get("kind") == "judge" else option
            for name, option in options.items()}


SIMPLE_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:\.[A-Za-z0-9_]+)*\}")


def _reachable(settings: dict[str, Any], texts: Any) -> dict[str, Any]:
    """The settings the options' interpolations can reach (all but `verifier`, which each option is): only
    the keys named when every interpolation is a plain ${key.path} and what those keys hold has none of
    its own (building the whole tree was most of this function's time); else all of them."""
    everything = {k: v for k, v in settings.items() if k != "verifier"}
    named: set[str] = set()
    for text in texts:
        found = SIMPLE_REFERENCE.findall(text)
        if len(found) != text.count("${"):
            return everything
        named.update(found)
    chosen = {k: everything[k] for k in named if k in everything}
    return everything if "${" in json.dumps(chosen, default=str) else chosen


def effective(options: dict[str, dict[str, Any]], chosen: str, row: dict[str, Any]) -> dict[str, Any] | None:
    """The verifier config for one row, or None when the sample is not verified. Raises ConfigError
    naming the valid choices when the row names an unknown verifier."""
    spec = row.get("verifier", chosen)
    overrides: dict[str, Any] = {}
    if isinstance(spec, dict):
        overrides = {k: v for k, v in spec.items() if k not in ("kind", "_target_")}
        spec = spec.get("kind")
        if any(key in overrides for key in preset.KEYS):
            raise ConfigError(f"a row's verifier cannot choose the judge's model preset: {row['verifier']!r}",
                              "set verifier.preset for the run, or give the row's judge \"model\" and \"provider\" whole")
    if not isinstance(spec, str) or spec not in options:
        raise ConfigError(f"unknown verifier {spec!r}",
                          f"name one of: {', '.join(sorted(options))} (conf/verifier/), e.g. \"verifier\": \"answer\"")
    cfg = {**copy.deepcopy(options[spec]), **overrides}
    if cfg.get("kind", spec) == NONE or not cfg.get("_target_"):
        return None
    cfg.update({k: row[k] for k in ROW_OPTION_NAMES if k in row and k in cfg})
    return cfg


def identity(cfg: dict[str, Any]) -> str:
    """A verifier's identity: its effective config without the keys that only change how it runs."""
    ident = {k: v for k, v in cfg.items() if k not in NOT_IDENTITY}
    if isinstance(ident.get("model"), dict):
        ident["model"] = {k: v for k, v in ident["model"].items() if k not in JUDGE_MODEL_NOT_IDENTITY}
    digest = hashlib.blake2b(canonical_json(ident).encode(), digest_size=10).hexdigest()
    return f"vf1:{cfg.get('kind', '?')}:{digest}"


def build(cfg: dict[str, Any], context: VerifyContext) -> Verifier:
    """Instantiate a verifier by its `_target_` (the run's context is passed, not configured)."""
    options.check(cfg)
    try:
        return instantiate({k: v for k, v in cfg.items() if k != "kind"}, _partial_=True, _convert_="all")(context=context)
    except ConfigError:
        raise
    except Exception as exc:  # a bad option value: name it
        raise ConfigError(f"verifier {cfg.get('kind')!r} cannot be built from its config: {exc}",
                          "check the verifier.* keys (hermes-exp --cfg job shows them)") from exc
