"""Validation of the model, provider and budget config before any work, without importing the model
client (so a run with nothing to do never imports openai)."""

from __future__ import annotations

from typing import Any

from hermes_exp.model.cache import CacheControl
from hermes_exp.model.ratelimit import Limits
from hermes_exp.model.retry import RetryPolicy
from hermes_exp.model.wire import static_request
from hermes_exp.money.budget import BudgetLimits
from hermes_exp.money.cost import Pricing


def check_config(settings: dict[str, Any]) -> None:
    """Validate every model, provider and budget setting before any work (raises ConfigError)."""
    model, provider = settings["model"], settings["provider"]
    static_request(model, provider)
    CacheControl.from_config(model.get("cache_control"))
    RetryPolicy.from_config(model.get("retry"))
    Limits.from_config(model.get("rate_limit"), int(settings.get("num_workers") or 1))
    Pricing.from_config(model.get("pricing"))
    BudgetLimits.from_settings(settings)
