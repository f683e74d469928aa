"""Spending limits: the run's budget (`budget.max_cost_usd`, counted over every invocation of the run)
and a per-task cap (`budget.max_task_cost_usd`). Each call reserves its worst-case cost first, so
the run stops within one call's worst case of the limit and never above it."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from hermes_exp.settings.sections import Section
from hermes_exp.money.cost import Pricing
from hermes_exp.errors import BudgetExhausted, ConfigError, ProviderError


@dataclass(frozen=True)
class BudgetLimits:
    max_cost_usd: float | None = None
    max_task_cost_usd: float | None = None
    sweep_max_cost_usd: float | None = None  # every job of a -m sweep together (hermes_exp.money.sweep_budget)
    assume_max_tokens: int = 4096  # a call's worst-case completion when model.sampling.max_tokens is null

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> BudgetLimits:
        section = Section("budget", settings.get("budget"), null="for no limit").only(cls.__dataclass_fields__)
        limits = cls(**{key: section.number(key, positive=True) for key, value in section.raw.items()
                        if value is not None})
        model = settings.get("model") or {}
        if (limits.max_cost_usd or limits.max_task_cost_usd or limits.sweep_max_cost_usd) and Pricing.from_config(model.get("pricing")) is None:
            raise ConfigError(
                f"a budget is set but model.pricing is null for model {model.get('name')!r}, so the cost of a "
                "call cannot be estimated before it is made",
                "set model.pricing.prompt=<USD per 1M tokens> and model.pricing.completion=<USD per 1M tokens>")
        return limits

    def completion_tokens(self, model: dict[str, Any]) -> int:
        """Completion tokens a call may use at most: max_tokens plus a separate reasoning budget."""
        sampling = model.get("sampling") or {}
        reasoning = model.get("reasoning") or {}
        return int(sampling.get("max_tokens") or self.assume_max_tokens) + int(reasoning.get("max_tokens") or 0)


class Budget:
    """The run's spend: the ledger's total at the start plus the calls booked since. Thread-safe. One per
    run, in the parent: its threads book here, worker processes and hosts through its broker (broker.py)."""

    def __init__(self, limit: float | None, spent: float = 0.0, label: str = "budget.max_cost_usd") -> None:
        self.limit = limit
        self.spent = spent
        self.label = label
        self._reserved = 0.0
        self._closed = False
        self._cond = threading.Condition()

    def reserve(self, worst: float) -> float:
        """Reserve a call's worst case. Waits while calls in flight hold the room it needs (they may cost
        less than they reserved); raises BudgetExhausted when even the settled spend leaves no room."""
        if self.limit is None:
            return 0.0
        with self._cond:
            while True:
                if self.spent + worst > self.limit:
                    raise BudgetExhausted(
                        f"no room for the next call: ${self.spent:.6f} spent of {self._limit_text()}, and "
                        f"the call could cost up to ${worst:.6f}")
                if self.spent + self._reserved + worst <= self.limit:
                    self._reserved += worst
                    return worst
                if self._closed:
                    raise BudgetExhausted(f"the run is stopping: no room for the next call, ${self.spent:.6f} "
                                          f"spent of {self._limit_text()}, the rest held by calls in flight")
                self._cond.wait()

    def _limit_text(self) -> str:
        return f"{self.label}={self.limit}" if self.label == "budget.max_cost_usd" else self.label

    def close(self) -> None:
        """No more bookings will settle here (the broker closed): a call waiting for room is refused."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def settle(self, reserved: float, actual: float) -> None:
        with self._cond:
            self._reserved -= reserved
            self.spent += actual
            self._cond.notify_all()


class TaskMeter:
    """One task's spend against `budget.max_task_cost_usd` (a task over its cap ends as error class
    `budget`, which a re-run retries only with resume.retry_errors=[..., budget])."""

    def __init__(self, limit: float | None, key: str | None = None) -> None:
        self.limit = limit
        self.key = key  # the task's key, for the spend journal
        self.spent = 0.0

    def check(self, worst: float) -> None:
        if self.limit is not None and self.spent + worst > self.limit:
            raise ProviderError(
                f"task cost cap reached: ${self.spent:.6f} spent of budget.max_task_cost_usd={self.limit}, and "
                f"the next call could cost up to ${worst:.6f}", transient=False, error_class="budget")

    def add(self, usage: dict[str, Any]) -> None:
        """Count one successful call (its usage facts, with `cost_usd`)."""
        self.spent += usage.get("cost_usd") or 0.0
