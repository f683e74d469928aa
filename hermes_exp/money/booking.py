"""A model call's booking in one process: its worst case reserved against the budgets (the run's, and the
sweep's when `budget.sweep_max_cost_usd` is set) and written to the spend journal before it is sent, then
settled at what it cost. Threads of the parent book here directly; worker processes and cluster nodes book
here through the parent's broker (money/broker.py)."""

from __future__ import annotations

from typing import Any

from hermes_exp.money import sweep_budget
from hermes_exp.money.budget import Budget
from hermes_exp.money.journal import SpendJournal

Ticket = tuple[float, "int | None"]  # what was reserved in the budgets, and the journal's entry


class Booking:
    """Budgets and journal, reserved and settled together. Thread-safe (each part is)."""

    def __init__(self, budget: Any, journal: SpendJournal | None = None) -> None:
        self.budget = budget
        self.journal = journal or SpendJournal(None, None)

    @classmethod
    def for_run(cls, settings: dict[str, Any], limit: float | None) -> Booking:
        """The run's budget seeded with what the ledger says was spent, the sweep's, and the journal."""
        spent = float((settings.get("invocation") or {}).get("spent_usd") or 0.0)
        budget = sweep_budget.for_settings(settings, Budget(limit, spent))
        return cls(budget, SpendJournal.for_run(settings))

    def reserve(self, worst: float, key: str | None) -> Ticket:
        """Raises BudgetExhausted (or SweepBudgetExhausted) when no room is left."""
        reserved = self.budget.reserve(worst)
        try:
            return reserved, self.journal.reserve(key, worst)
        except BaseException:
            self.budget.settle(reserved, 0.0)
            raise

    def settle(self, ticket: Ticket, actual: float) -> None:
        reserved, entry = ticket
        self.budget.settle(reserved, actual)
        self.journal.settle(entry, actual)

    def discard(self) -> None:
        """The ledger accounts for every call booked here: the journal has done its job."""
        self.journal.discard()

    def close(self) -> None:
        """Stop writing the journal and keep it: what it holds is folded into the ledger by the parent.
        Calls still waiting for room in the budget are refused."""
        self.journal.close()
        self.budget.close()
