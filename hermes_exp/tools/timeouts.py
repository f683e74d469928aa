"""The one rule for a timeout a model asks for: within the configured limit, or the limit."""

from __future__ import annotations

import math
from typing import Any


def clamp_timeout(asked: Any, limit: float) -> float:
    """The model's `timeout` where it is a usable number of seconds within `tools.terminal_timeout`, else
    that limit: NaN, infinities, zero, negatives, huge values, strings and booleans never lift it."""
    if isinstance(asked, bool) or not isinstance(asked, (int, float)):
        return limit
    try:
        seconds = float(asked)
    except OverflowError:  # an integer too big for a float
        return limit
    return seconds if math.isfinite(seconds) and 0 < seconds <= limit else limit
