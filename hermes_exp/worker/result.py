"""What a worker hands back for one task: one typed value, filled through its methods only.

`TaskResult.to_dict()` is the result's dict as the ledger has always kept it (plus `timings`), so every
ledger row, old or new, reads the same way; the parent reads the attributes. A plain dataclass of plain
values: it pickles for the processes, Dask and Ray executors."""

from __future__ import annotations

import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any

from hermes_exp.errors import HermesExpError, ProviderError

# The phases a task's time is measured in, in the order they run (seconds each, in `timings`); a phase
# that did not run is absent, as are all of them in results recorded before timings were kept.
PHASES = ("sandbox", "fixtures", "agent", "verifier", "close")

# Kept beside the result in the ledger (the score, the workdir archive, the tool list once per distinct
# list) or not kept at all (the worker process's rate-limiter figures): out of the stored result JSON.
APART = frozenset({"score", "archive", "archive_note", "tools", "limiter"})


@dataclass
class TaskResult:
    """One task's outcome: `finished` (the agent's conversation), `error` (class, whether a retry may
    help, a run-wide cause, the conversation so far) or `cancelled`. None means "not set": such a field
    is left out of `to_dict()`, as it was absent from the dict results of before."""

    key: str
    index: int
    sample: int
    row: dict[str, Any]
    started_at: float
    toolsets: list[str] | None = None
    tools: list[dict[str, Any]] | None = None  # the list really sent: ShareGPT's <tools> block
    tools_offered: list[str] | None = None
    state: str | None = None  # finished | error | cancelled
    messages: list[dict[str, Any]] | None = None
    api_calls: int | None = None
    completed: bool | None = None
    partial: bool | None = None
    stop_reason: str | None = None
    stop_detail: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    usage: list[dict[str, Any]] | None = None
    error_class: str | None = None
    transient: bool | None = None
    error: str | None = None
    stop_run: str | None = None  # a hermes_exp.stops.RunStop the parent may stop the whole run for
    score: dict[str, Any] | None = None
    archive: bytes | None = None
    archive_note: str | None = None
    tool_model_calls: list[dict[str, Any]] | None = None
    spent_usd: float | None = None
    finished_at: float | None = None
    task_attempts: int | None = None
    limiter: dict[str, Any] | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @classmethod
    def start(cls, task: Any) -> TaskResult:
        """A task's result as its attempt begins (`task`: a hermes_exp.dataset.tasks.Task)."""
        return cls(key=task.key, index=task.index, sample=task.sample, row=task.row, started_at=time.time())

    def offer(self, toolsets: list[str], tools: list[dict[str, Any]]) -> None:
        self.toolsets, self.tools = toolsets, tools
        self.tools_offered = [t["function"]["name"] for t in tools]

    def finish(self, outcome: Any) -> None:
        """The agent's conversation ended (`outcome`: a hermes_exp.agent.loop.Outcome)."""
        self.state = "finished"
        self.messages, self.api_calls, self.tool_calls, self.usage = (
            outcome.messages, outcome.api_calls, outcome.tool_calls, outcome.usage)
        self.completed, self.partial = outcome.completed, outcome.partial
        self.stop_reason, self.stop_detail = outcome.stop_reason, outcome.stop_detail

    def cancel(self) -> None:
        self.state = "cancelled"

    def fail(self, exc: Exception) -> None:
        """The error that ended the task: its class, whether a retry may help, a run-wide cause and the
        conversation so far. Any other exception is a bug: `internal`, with where it happened."""
        self.state = "error"
        if not isinstance(exc, (HermesExpError, ProviderError)):
            self.error_class, self.transient = "internal", False
            self.error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}"
            return
        self.error_class, self.transient, self.error, self.stop_run = (
            exc.error_class, exc.transient, str(exc), exc.stop_run)
        partial = exc.outcome
        if partial is not None:
            self.api_calls, self.usage, self.messages = partial.api_calls, partial.usage, partial.messages

    def verified(self, score: dict[str, Any], archive: bytes | None = None, note: str | None = None) -> None:
        self.score, self.archive, self.archive_note = score, archive, note

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Add the time spent in the block to phase `name` (one of PHASES), even when it raises."""
        began = time.monotonic()
        try:
            yield
        finally:
            self.timings[name] = round(self.timings.get(name, 0.0) + time.monotonic() - began, 6)

    def end(self, spent_usd: float) -> None:
        self.spent_usd, self.finished_at = spent_usd, time.time()

    @property
    def wall_seconds(self) -> float:
        return (self.finished_at or self.started_at) - self.started_at

    def to_dict(self) -> dict[str, Any]:
        """The result as a plain dict (what verifiers read, and the shape the ledger keeps)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["timings"] = {p: self.timings[p] for p in PHASES if p in self.timings} or None  # in PHASES order
        return {k: v for k, v in out.items() if v is not None}

    def stored(self) -> dict[str, Any]:
        """The result JSON the ledger keeps: without what is kept apart (APART)."""
        return {k: v for k, v in self.to_dict().items() if k not in APART}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskResult:
        """A result from its dict (a ledger's result JSON): keys this class does not know are dropped."""
        known = {f.name for f in fields(cls)}
        return cls(**{"sample": 0, **{k: v for k, v in data.items() if k in known}})


@dataclass
class Reverified:
    """A finished sample verified again without its agent (`score`: None when no verifier applies)."""

    key: str
    result: dict[str, Any]
    score: dict[str, Any] | None
    spent_usd: float = 0.0
    skipped: str | None = None  # why it could not run (no archive, the engine down): the old scores stand
