"""The run's own keys that other modules read with a bare `bool()`, `int()` or `float()`, checked once
before any work: `resume.redo_all=no` is the string "no" to Hydra, which `bool()` takes for true (every
task run again, and paid for again); `seed=abc` would fail every task one by one after the run started.
Each error names the key, the bad value, what is valid and the fix (config_section)."""

from __future__ import annotations

from typing import Any

from hermes_exp.settings.sections import Section

FLAGS = {"dataset": ("skip_invalid",), "resume": ("redo_filtered", "redo_all", "new_identity"),
         "outputs": ("splits", "allow_shrink", "compress", "private")}
PREFLIGHT = ("none", "oracle")  # hermes_exp/run/environments.py


def preflight(settings: dict[str, Any]) -> str:
    """`preflight`: none (the default) or oracle; a typo must not let the model see unchecked tasks."""
    return str(Section("", settings).choice(
        "preflight", PREFLIGHT, "none",
        fix="preflight=oracle runs each environment's reference solution and verifier once before any model "
            "call (broken tasks are never sent to the model); preflight=none (the default) skips that"))


def check(settings: dict[str, Any]) -> None:
    top = Section("", settings)
    top.number("seed", integer=True, required=True, fix="set seed=<integer>, e.g. seed=0 (it seeds the toolset draw)")
    top.number("setup_timeout", 300, positive=True, unit="seconds for a row's setup command")
    preflight(settings)
    for name, keys in FLAGS.items():
        section = Section(name, settings.get(name))
        for key in keys:
            section.flag(key, False)
    resume = Section("resume", settings.get("resume"))
    # the readers of these take a key that is present as its value: null is not "the default" for them
    resume.number("task_attempts", low=1, integer=True, unit="in-run attempts of a task", required="task_attempts" in resume.raw)
    resume.number("grace_seconds", low=0, unit="seconds conversations in flight get to stop",
                  required="grace_seconds" in resume.raw)
    Section("score", settings.get("score")).choice(
        "only", ("suspect",), fix="set score.only=suspect (action=score verifies only the verifier_suspect samples "
        "again), or leave it null (every sample without a score from the current verifier)")
    tools = Section("tools", settings.get("tools"))
    tools.number("terminal_timeout", positive=True, unit="seconds", required="terminal_timeout" in tools.raw)
    tools.number("max_output_chars", integer=True, positive=True, unit="characters of tool output kept",
                 required="max_output_chars" in tools.raw)
    agent = Section("agent", settings.get("agent"))
    agent.number("timeout_seconds", positive=True, unit="seconds for agent=oracle's solution command",
                 required="timeout_seconds" in agent.raw)
    model = Section("model", settings.get("model"))
    model.number("timeout", positive=True, unit="seconds for one whole HTTP attempt", required="timeout" in model.raw)
