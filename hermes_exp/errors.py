"""The one exception hierarchy of hermes-exp: every error a user can act on carries its fix."""

from __future__ import annotations

from typing import Any

from hermes_exp.stops import RunStop

# The ledger's error classes (what `resume.retry_errors` names). VERIFIER: a failed verification,
# re-verified by every invocation, the agent never re-run.
VERIFIER = "verifier"
# BROKEN: preflight=oracle found the task's environment broken (its reference solution does not pass, or its
# verifier cannot start): never sent to the model, not an agent's zero (hermes_exp/run/environments.py).
BROKEN = "broken"
ERROR_CLASSES = ("provider", "sandbox", "model", "internal", "budget", VERIFIER, BROKEN)


class HermesExpError(Exception):
    """An error the user can act on. `hint` says how to fix it; the CLI prints both and exits non-zero.

    An error that ends a task says what the task's result records: `error_class` (the ledger's class),
    `transient` (whether running the task again may help), `stop_run` (a run-wide cause, see
    hermes_exp.stops.RunStop) and `outcome` (the conversation so far, when one had started)."""

    exit_code = 2
    error_class = "internal"
    transient = False
    stop_run: str | None = None
    outcome: Any = None

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  fix: {self.hint}" if self.hint else self.message


class ConfigError(HermesExpError):
    """A config key holds a bad value (names the key, the value and the valid choices)."""


class DatasetError(HermesExpError):
    """The dataset file is missing or has invalid lines (names file and line numbers)."""


class MissingApiKeyError(ConfigError):
    """The environment variable that should hold the API key is not set."""


class LedgerError(HermesExpError):
    """The run directory's ledger cannot be used (another experiment, locked, corrupt)."""


class StorageError(HermesExpError):
    """The run directory cannot be written (disk full) or its ledger became unreadable mid-run."""


class SandboxError(HermesExpError):
    """A sandbox could not be opened or used (engine down, image missing, bubblewrap absent)."""

    error_class = "sandbox"
    transient = True


class BrokenTask(HermesExpError):
    """preflight=oracle: the task's environment does not hold up (error class `broken`)."""

    error_class = BROKEN


class ModelError(HermesExpError):
    """The model's reply cannot be used as an assistant turn (its tool calls are not a list of call
    objects, or the message is not an object): error class `model`. Not retried by default (add `model`
    to resume.retry_errors); the calls made, and paid for, stay on record."""

    error_class = "model"


class ToolError(Exception):
    """A tool call failed in a way the model should see as the tool's error result."""


class ProviderError(Exception):
    """A model call failed. `transient` says whether retrying may help; `error_class` goes to the ledger.
    `stop_run` names a run-wide cause (a hermes_exp.stops.RunStop) that the parent may stop the whole run for.
    `outcome` is the conversation so far (an agent.loop.Outcome), set by the turn loop: the calls already
    made, and paid for, stay on record."""

    def __init__(self, message: str, *, transient: bool, error_class: str = "provider",
                 stop_run: str | None = None, outcome: Any = None) -> None:
        super().__init__(message)
        self.transient = transient
        self.error_class = error_class
        self.stop_run = stop_run
        self.outcome = outcome


class BudgetExhausted(ProviderError):
    """The next call could take the run over `budget.max_cost_usd`. The task stops; the parent stops the
    run, records what the task spent and leaves it pending, so a run with a higher budget continues it."""

    def __init__(self, message: str) -> None:
        super().__init__(message, transient=False, error_class="budget", stop_run=RunStop.BUDGET)


class Cancelled(Exception):
    """The run is stopping (Ctrl-C, SIGTERM, budget): end this conversation without a result."""


class ClusterError(HermesExpError):
    """The executor's cluster lost the workers a run needs (every Ray actor died with its node).
    Finished tasks are kept; the same command again runs the rest."""

    exit_code = 3


class RunStopped(HermesExpError):
    """The run stopped dispatching early (authentication keeps failing, or the budget is reached).
    Finished tasks are kept; the message says what happened and how to continue."""

    exit_code = 4
