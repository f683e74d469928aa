"""Every start-up check of an invocation, in one place: `check_all(settings) -> Checked`, one frozen value
(the action, the resume intent, the samples, the export selection and formats, the pilot, the
distribution) that later code reads instead of validating the settings again."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_exp import compress
from hermes_exp.errors import ConfigError
from hermes_exp.run.plan import intent, samples_per_prompt
from hermes_exp.run.prepare import Prepared
from hermes_exp.sandbox import options as sandbox_options
from hermes_exp.settings import count_limits, run_options
from hermes_exp.settings import secrets as secret_guard
from hermes_exp.settings.resolved import api_key, load_prefill
from hermes_exp.store import filters as filters_mod
from hermes_exp.store.formats import chosen_formats
from hermes_exp.store.samples import selection_mode
from hermes_exp.tools import mcp

ACTIONS = ("run", "export", "compress", "score", "merge")


@dataclass(frozen=True)
class Checked:
    """The settings as checked at start-up. `settings`: with the MCP servers' tools once discovered;
    `prepared`: what the run derives from them (identity, dataset, selection, scan cache), each made once;
    `distribution`: None while the toolsets are not checked yet (a settled run's no-op skips building
    every toolset's tools and starting MCP servers: `with_toolsets` makes that check when work turns up)."""

    settings: dict[str, Any]
    prepared: Prepared
    action: str
    intent: dict[str, Any]
    samples: int
    selection: str
    formats: tuple[str, ...]
    pilot: int | None
    distribution: dict[str, float] | None

    @property
    def deferred(self) -> bool:
        return self.distribution is None

    def with_toolsets(self) -> Checked:
        """The start-up work a run that looked settled skipped, made once its plan found work after all."""
        if self.distribution is not None:
            return self
        settings = mcp.with_discovered(self.settings)
        return dataclasses.replace(self, settings=settings, distribution=check_toolsets(settings))


def check_all(settings: dict[str, Any]) -> Checked:
    """Validate everything an invocation needs before it claims the run directory, in the order a user
    meets the errors; return what was found."""
    secret_guard.check_settings(settings)  # a key typed into a config file: refused before it is saved
    check_basics(settings)
    prepared = Prepared(settings, Path(settings["run_dir"]).resolve())
    action = settings.get("action", "run")
    # Every toolset's tools are built, and every MCP server started to list its tools, only when this
    # invocation may run something: a settled run's no-op skips both (prepare.py).
    deferred = action == "run" and prepared.settled()
    if action not in ("export", "merge") and not deferred:
        settings = mcp.with_discovered(settings)  # MCP servers' tools, listed once, before anything else
    distribution = None if deferred else check_toolsets(settings)
    sandbox_options.check(settings.get("sandbox"))  # before the run directory is claimed by this config
    run_options.check(settings)  # resume.redo_all=no is a string bool() takes for true
    formats = tuple(chosen_formats(settings))  # a typo in outputs.formats must not surface after hours of work
    compress.check(settings)
    selection = selection_mode(settings)
    filters_mod.warn_if_nothing_verifies(settings)
    if action not in ACTIONS:
        raise ConfigError(f"action={action!r} is not an action", f"choose one of: {', '.join(ACTIONS)}")
    return Checked(settings, prepared, action, intent(settings), samples_per_prompt(settings), selection,
                   formats, prepared.pilot if action == "run" else None, distribution)


def check(settings: dict[str, Any]) -> dict[str, float]:
    """Validate what must be right before any work; return the distribution the run draws from."""
    check_basics(settings)
    return check_toolsets(settings)


def check_basics(settings: dict[str, Any]) -> None:
    """check() but the toolsets: names, counts, the model's and agent's options, the API key."""
    run_name = settings.get("run_name")
    if isinstance(run_name, bool):  # `run_name: true` in a config file: the word written
        settings["run_name"] = run_name = str(run_name).lower()
    elif isinstance(run_name, (int, float)):  # `run_name: 2024` in a config file (the command line's stays text)
        settings["run_name"] = run_name = str(run_name)
    if not isinstance(run_name, str) or not run_name.strip() or run_name != run_name.strip():
        raise ConfigError(f"run_name must be a non-empty name, got {run_name!r}",
                          "set run_name=<name>, e.g. run_name=my_first_run")
    for key in ("max_turns", "num_workers", "batch_size"):
        value = settings.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{key} must be a positive integer, got {value!r}", f"set {key}=<n> with n >= 1")
    count_limits.check(settings)  # counts that would hang the run instead of failing
    if settings.get("max_samples") is not None and (not isinstance(settings["max_samples"], int) or settings["max_samples"] < 1):
        raise ConfigError(f"max_samples must be a positive integer or null, got {settings['max_samples']!r}",
                          "set max_samples=<n> or max_samples=null")
    load_prefill(settings.get("prefill_messages"))
    from hermes_exp.agent.limits import TaskLimits

    TaskLimits.from_settings(settings)
    from hermes_exp.model.checks import check_config  # sampling, routing, reasoning, retry, rate limit, budget

    check_config(settings)
    from hermes_exp.worker import tracing  # tracing.*: the options, and the extra when they turn it on

    tracing.check(settings)
    api_key(settings)


def check_toolsets(settings: dict[str, Any]) -> dict[str, float]:
    """Every toolset the distribution can draw is defined and usable: its tools built from config (each
    tool module imported), the distribution validated; return the distribution the run draws from."""
    from hermes_exp.tools.readiness import drawable
    from hermes_exp.tools.registry import Registry

    return drawable(settings, Registry.from_settings(settings))  # the demo's warning: when tasks start
