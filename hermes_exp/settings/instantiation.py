"""Building a configured object (`_target_`) from its config node, with errors a user can act on.

Hydra wraps whatever a constructor raises in an InstantiationException ("Error in call to target ..."),
which the CLI would print as a Hydra failure without its fix. A constructor's own error (it names the key,
the bad value and the valid choices) comes out as itself; any other failure names the config key."""

from __future__ import annotations

import copy
import importlib
from typing import Any

from hydra.errors import InstantiationException
from hydra.utils import instantiate

from hermes_exp.errors import ConfigError, HermesExpError

HYDRA_KEYS = ("_partial_", "_args_", "_recursive_", "_convert_")


def construct(conf: Any, key: str, hint: str = "", **kwargs: Any) -> Any:
    """`instantiate(conf, **kwargs)`; `key` is the config node's path (e.g. `sandbox`), for the message."""
    target = _own_class(conf, kwargs)
    try:
        return instantiate(conf, **kwargs) if target is None else _call(target, conf, kwargs)
    except InstantiationException as exc:
        cause = exc.__cause__
        if isinstance(cause, HermesExpError):
            raise cause from exc
        raise ConfigError(f"{key} cannot be built: {cause or exc}",
                          hint or f"check {key}._target_ and its settings") from exc


def _own_class(conf: Any, kwargs: dict[str, Any]) -> type | None:
    """The class to call directly, without instantiate's round trip through OmegaConf (a tenth of a
    second of every start-up for the tools): one of this package's own classes, built from plain
    settings converted whole (`_convert_="all"`), with no nested `_target_` or other instantiate option.
    None: instantiate does it (and its target policy, and its messages for a target it cannot find)."""
    if kwargs.get("_convert_") != "all" or not isinstance(conf, dict) or any(k in conf for k in HYDRA_KEYS):
        return None
    path = conf.get("_target_")
    if not isinstance(path, str) or not path.startswith("hermes_exp.") or any(k in kwargs for k in HYDRA_KEYS[:3]):
        return None
    if _nested_target([v for k, v in conf.items() if k != "_target_"]):
        return None
    module, _, name = path.rpartition(".")
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return None
    return found if isinstance(found, type) and found.__module__ == module else None


def _nested_target(value: Any) -> bool:
    if isinstance(value, dict):
        return "_target_" in value or any(_nested_target(v) for v in value.values())
    return isinstance(value, list) and any(_nested_target(v) for v in value)


def _call(target: type, conf: dict[str, Any], kwargs: dict[str, Any]) -> Any:
    """`target(**conf, **kwargs)` on a copy of the settings; a failure is reported as instantiate's."""
    values = copy.deepcopy({k: v for k, v in conf.items() if k != "_target_"})
    values.update({k: v for k, v in kwargs.items() if k != "_convert_"})
    try:
        return target(**values)
    except Exception as exc:
        raise InstantiationException(f"Error in call to target '{conf['_target_']}':\n{exc!r}") from exc
