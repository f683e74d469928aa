"""Building a configured object (`_target_`) from its config node, with errors a user can act on.

Hydra wraps whatever a constructor raises in an InstantiationException ("Error in call to target ..."),
which the CLI would print as a Hydra failure without its fix. A constructor's own error (it names the key,
the bad value and the valid choices) comes out as itself; any other failure names the config key."""

from __future__ import annotations

from typing import Any

from hydra.errors import InstantiationException
from hydra.utils import instantiate

from hermes_exp.errors import ConfigError, HermesExpError


def construct(conf: Any, key: str, hint: str = "", **kwargs: Any) -> Any:
    """`instantiate(conf, **kwargs)`; `key` is the config node's path (e.g. `sandbox`), for the message."""
    try:
        return instantiate(conf, **kwargs)
    except InstantiationException as exc:
        cause = exc.__cause__
        if isinstance(cause, HermesExpError):
            raise cause from exc
        raise ConfigError(f"{key} cannot be built: {cause or exc}",
                          hint or f"check {key}._target_ and its settings") from exc
