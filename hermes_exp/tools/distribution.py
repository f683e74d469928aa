"""The seeded toolset draw: each toolset included independently with its probability."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping

from hermes_exp.errors import ConfigError


def validate(name: str, toolsets: Mapping[str, object]) -> dict[str, float]:
    """Check a distribution's probabilities; return toolset -> probability in percent. Whether each
    toolset exists and can be used is the registry's business (tools/readiness.py)."""
    if not toolsets:
        raise ConfigError(f"distribution {name!r} lists no toolsets",
                          "give it at least one toolset, e.g. distribution.toolsets={terminal: 100}")
    checked: dict[str, float] = {}
    for toolset, prob in toolsets.items():
        if isinstance(prob, bool) or not isinstance(prob, (int, float)) or not 0 <= prob <= 100:
            raise ConfigError(
                f"distribution {name!r}: probability of {toolset!r} is {prob!r}, not a number from 0 to 100",
                f"set distribution.toolsets.{toolset} to a percentage between 0 and 100")
        checked[str(toolset)] = float(prob)
    if max(checked.values()) <= 0:
        raise ConfigError(f"distribution {name!r} gives every toolset probability 0",
                          "give at least one toolset a probability above 0")
    return checked


def draw(toolsets: Mapping[str, float], seed: int, task_key: str) -> list[str]:
    """The toolsets for one task: stable for the same seed and key, at least one always."""
    digest = hashlib.blake2b(f"{seed}|{task_key}".encode(), digest_size=8).digest()
    rng = random.Random(int.from_bytes(digest, "big"))
    chosen = [ts for ts, prob in toolsets.items() if rng.random() * 100 < prob]
    if not chosen:
        chosen = [max(toolsets, key=lambda ts: toolsets[ts])]
    return chosen
