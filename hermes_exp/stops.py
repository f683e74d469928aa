"""The vocabulary of stops: why a conversation ended (a sample's `stop_reason`, kept in the ledger and
counted in statistics.json) and why the parent stops a whole run. Members are strings, so they are
stored, compared and printed as their values."""

from __future__ import annotations

from enum import StrEnum


class Stop(StrEnum):
    """Why one conversation ended (agent.loop.Outcome.stop_reason)."""

    FINAL_ANSWER = "final_answer"  # the model answered without a tool call
    MAX_TURNS = "max_turns"  # max_turns model calls, no final answer
    INVALID_TOOL_CALLS = "invalid_tool_calls"  # agent.loop.MAX_CONSECUTIVE_INVALID invalid calls in a row
    CONTEXT_OVERFLOW = "context_overflow"  # the prompt no longer fits, or the answer was cut at the limit
    TASK_SECONDS = "task_seconds"  # limits.task_seconds reached
    TASK_TOKENS = "task_tokens"  # limits.task_tokens reached
    NOP = "agent=nop: did nothing"  # the control agents (agent/control.py)
    ORACLE_RAN = "agent=oracle: ran the solution"
    ORACLE_NO_SOLUTION = "agent=oracle: no solution in the row"


class RunStop(StrEnum):
    """Why the parent stops dispatching (ProviderError.stop_run, guard.RunGuard.stopped)."""

    AUTH = "auth"  # model calls keep failing authentication
    NOT_FOUND = "not_found"  # model calls keep answering 404: no such model (or path) at the endpoint
    BUDGET = "budget"  # budget.max_cost_usd reached
    SWEEP_BUDGET = "sweep_budget"  # budget.sweep_max_cost_usd reached by the sweep's jobs together
