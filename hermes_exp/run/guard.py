"""The parent's run-wide stops: the budget is reached, or calls keep failing authentication or finding no
such model (404). It stops dispatching, keeps count of what the run spent, and ends the run with one
message saying how to go on."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from hermes_exp.model.retry import RetryPolicy
from hermes_exp.money.budget import BudgetLimits
from hermes_exp.errors import RunStopped
from hermes_exp.stops import RunStop
from hermes_exp.worker.result import TaskResult

T = TypeVar("T")
STREAK_STOPS = (RunStop.AUTH, RunStop.NOT_FOUND)  # causes that stop the run after auth_threshold in a row


class RunGuard:
    """`spent` starts from the ledger (every earlier invocation) and grows with each result."""

    def __init__(self, settings: dict[str, Any], spent: float) -> None:
        self.settings = settings
        self.limit = BudgetLimits.from_settings(settings).max_cost_usd
        self.spent = spent
        self.auth_threshold = RetryPolicy.from_config(settings["model"].get("retry")).stop_after_auth_failures
        self.stopped: RunStop | None = None
        self._streak = 0
        self._streak_cause: str | None = None
        self._last_error = ""
        self._limiters: dict[str, tuple[int, int]] = {}  # worker process -> (concurrency, 429s seen)

    def gate(self, tasks: Iterable[T]) -> Iterator[T]:
        """The tasks, until the run is stopped (checked before the next one is even read)."""
        source = iter(tasks)
        while not self.stopped:
            task = next(source, None)
            if task is None:
                return
            yield task

    def observe(self, result: TaskResult, ledger: Any) -> bool:
        """Count a worker result; False when it is not a task outcome to record (cancelled, or stopped by
        the budget: the task stays pending, and only what it spent is written down)."""
        spent = float(result.spent_usd or 0.0)
        self.spent += spent
        cause = result.stop_run if result.state == "error" else None
        # the same answer for every task (wrong key, wrong model name): a few in a row stop the run
        self._streak = self._streak + 1 if cause in STREAK_STOPS and cause == self._streak_cause else \
            int(cause in STREAK_STOPS)
        self._streak_cause = cause
        if cause in STREAK_STOPS and self._streak >= self.auth_threshold:
            self._stop(cause, result.error or "")
        if cause == RunStop.SWEEP_BUDGET:
            self._stop(RunStop.SWEEP_BUDGET, result.error or "")
        if cause == RunStop.BUDGET or (self.limit is not None and self.spent >= self.limit):
            self._stop(RunStop.BUDGET, (result.error or "") if cause == RunStop.BUDGET else "")
        keep = result.state != "cancelled" and cause not in (RunStop.BUDGET, RunStop.SWEEP_BUDGET)
        if not keep and spent:
            ledger.add_spend(result.key, spent)
        return keep

    def _stop(self, cause: RunStop, error: str) -> None:
        if not self.stopped:
            self.stopped, self._last_error = cause, error
            print(f"\nstopping the run ({cause}): no new tasks are started", file=sys.stderr)

    def note(self, row: dict[str, Any], limiter: dict[str, Any] | None) -> dict[str, Any]:
        """Keyword arguments for Progress.note after a recorded task. `limiter`: the rate-limiter figures
        the task's worker process sent back; the run's concurrency is the sum over its processes."""
        facts: dict[str, Any] = {"tokens": (row.get("prompt_tokens") or 0) + (row.get("completion_tokens") or 0),
                                 "cost": row.get("cost_usd") or 0.0}
        if limiter:
            _, seen = self._limiters.get(limiter["process"], (0, 0))
            self._limiters[limiter["process"]] = (limiter["concurrency"], limiter["rate_limited"])
            facts["rate_limited"] = max(0, limiter["rate_limited"] - seen)
        if self._limiters:
            facts["concurrency"] = sum(c for c, _ in self._limiters.values())
        return facts

    def check(self) -> None:
        """Raise RunStopped (non-zero exit) if the run was stopped; call after the outputs are written."""
        if self.stopped == RunStop.AUTH:
            provider = self.settings["provider"]
            raise RunStopped(
                f"stopped early: {self.auth_threshold} model calls in a row failed authentication "
                f"(model {self.settings['model']['name']!r} via {provider.get('name')}); last error: "
                f"{self._last_error}",
                f"check the API key in ${provider.get('api_key_env') or '(no key configured)'} and that it may "
                "use this model; finished tasks are saved and the same command resumes")
        if self.stopped == RunStop.NOT_FOUND:
            model, url = self.settings["model"], self.settings["provider"].get("base_url")
            raise RunStopped(
                f"stopped early: {self.auth_threshold} model calls in a row answered HTTP 404: no model "
                f"{model['name']!r} at {model.get('base_url') or url} (or no such path); last error: {self._last_error}",
                "check model.name against the provider's model list, and model.base_url / provider.base_url (an "
                "OpenAI-compatible server's usually ends in /v1); finished tasks are saved and the same command resumes")
        if self.stopped == RunStop.SWEEP_BUDGET:
            limit = (self.settings.get("budget") or {}).get("sweep_max_cost_usd")
            raise RunStopped(
                f"{self._last_error}; this job spent ${self.spent:.6f} (every invocation counted); its unfinished "
                "tasks were left pending",
                f"raise it, e.g. budget.sweep_max_cost_usd={_suggest(limit)}, and run the same sweep again to continue")
        if self.stopped == RunStop.BUDGET:
            why = f" ({self._last_error})" if self._last_error else ""
            raise RunStopped(
                f"budget reached: ${self.spent:.6f} spent by this run (every invocation counted) of "
                f"budget.max_cost_usd={self.limit}{why}; unfinished tasks were left pending",
                f"raise it, e.g. budget.max_cost_usd={_suggest(self.limit)}, and run the same command "
                "again to continue")


def _suggest(limit: float | None) -> str:
    return f"{(limit or 0) * 2:g}"
