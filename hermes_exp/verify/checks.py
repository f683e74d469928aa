"""`verifier=checks`: deterministic checks of the trajectory, from the row's `checks` object, all of
which must hold. The reward is the share of checks that hold (so partial progress is visible);
the sample passes only when every one does. A tool is named by any of its names (tools.names): the check
reads the calls of the tool the run offered under its own name.

  {"checks": {"tool_called": "terminal", "tool_succeeded": ["write_file"],
              "final_response_contains": "42", "final_response_excludes": ["sorry"],
              "max_tool_errors": 0, "max_turns": 5}}
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hermes_exp.sandbox.base import Sandbox
from hermes_exp.tools.names import offered_name
from hermes_exp.tools.registry import is_failure
from hermes_exp.verify.base import Verdict, VerifierFailed, VerifyContext, final_answer

Check = Callable[[Any, dict[str, Any], str, bool], "str | None"]  # (argument, result, answer, case) -> failure


def _names(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else [str(v) for v in value or []]


def _fold(text: str, case_sensitive: bool) -> str:
    return text if case_sensitive else text.casefold()


def _tool_called(arg: Any, result: dict[str, Any], answer: str, case: bool) -> str | None:
    called = {c.get("name") for c in result.get("tool_calls") or []}
    missing = [n for n in _names(arg) if n not in called]
    return f"never called {missing}" if missing else None


def _tool_succeeded(arg: Any, result: dict[str, Any], answer: str, case: bool) -> str | None:
    ok = {c.get("name") for c in result.get("tool_calls") or [] if not c.get("failed")}
    missing = [n for n in _names(arg) if n not in ok]
    return f"no successful call of {missing}" if missing else None


TOOL_CHECKS = ("tool_called", "tool_succeeded")  # their arguments name tools


def _as_offered(checks: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """The checks with each tool name resolved to the name this run offers that tool under (tools.names):
    a grader written for `process` reads a run that offered `process_manage`, and the other way round."""
    resolved = dict(checks)
    for key in TOOL_CHECKS:
        if key in resolved:
            resolved[key] = [offered_name(n, settings) for n in _names(resolved[key])]
    return resolved


def _contains(arg: Any, result: dict[str, Any], answer: str, case: bool) -> str | None:
    missing = [t for t in _names(arg) if _fold(t, case) not in _fold(answer, case)]
    return f"final response lacks {missing}" if missing else None


def _excludes(arg: Any, result: dict[str, Any], answer: str, case: bool) -> str | None:
    found = [t for t in _names(arg) if _fold(t, case) in _fold(answer, case)]
    return f"final response contains {found}" if found else None


def _exited_non_zero(message: dict[str, Any]) -> bool:
    """A tool answer reporting a command's non-zero `exit_code` (terminal, process)."""
    try:
        data = json.loads(message.get("content") or "")
    except (TypeError, ValueError):
        return False
    code = data.get("exit_code") if isinstance(data, dict) else None
    return isinstance(code, int) and not isinstance(code, bool) and code != 0


def _max_tool_errors(arg: Any, result: dict[str, Any], answer: str, case: bool) -> str | None:
    """A tool error here is a call the tool reported as failed (Hermes's `failed`, as in tool_stats) or a
    command that exited non-zero: the tool "succeeded" in running it, but the session was not clean."""
    failed = sum(1 for c in result.get("tool_calls") or [] if c.get("failed"))
    exited = sum(1 for m in result.get("messages") or []
                 if m.get("role") == "tool" and not is_failure(m.get("content")) and _exited_non_zero(m))
    errors = failed + exited
    return f"{errors} tool errors > {arg}" if errors > int(arg) else None


def _max_turns(arg: Any, result: dict[str, Any], answer: str, case: bool) -> str | None:
    turns = sum(1 for m in result.get("messages") or [] if m.get("role") == "assistant")
    return f"{turns} turns > {arg}" if turns > int(arg) else None


CHECKS: dict[str, Check] = {
    "tool_called": _tool_called, "tool_succeeded": _tool_succeeded,
    "final_response_contains": _contains, "final_response_excludes": _excludes,
    "max_tool_errors": _max_tool_errors, "max_turns": _max_turns,
}


def check_spec(checks: Any) -> str | None:
    """What is wrong with a row's `checks` (None when it is usable), for the up-front dataset check."""
    if not isinstance(checks, dict) or not checks:
        return "\"checks\" must be a non-empty object, e.g. {\"tool_called\": \"terminal\"}"
    unknown = sorted(set(checks) - set(CHECKS))
    if unknown:
        return f"unknown check(s) {unknown} in \"checks\"; known: {', '.join(CHECKS)}"
    for name in ("max_tool_errors", "max_turns"):
        if name in checks and (isinstance(checks[name], bool) or not isinstance(checks[name], int)):
            return f"\"checks\".{name} must be an integer"
    return None


class ChecksVerifier:
    needs_sandbox = False

    def __init__(self, case_sensitive: bool = False, pass_threshold: float = 1.0,
                 context: VerifyContext | None = None, **_: Any) -> None:
        self.case_sensitive = bool(case_sensitive)
        self.pass_threshold = float(pass_threshold)
        self.settings = (context.settings if context else None) or {}  # its tools.names resolves tool names

    def row_problem(self, row: dict[str, Any]) -> str | None:
        return check_spec(row.get("checks"))

    def verify(self, sandbox: Sandbox | None, row: dict[str, Any], result: dict[str, Any]) -> Verdict:
        checks = row.get("checks")
        problem = check_spec(checks)
        if problem:
            raise VerifierFailed(f"verifier=checks: {problem}")
        answer = final_answer(result)
        checks = _as_offered(checks, self.settings)
        failures = {name: CHECKS[name](arg, result, answer, self.case_sensitive) for name, arg in checks.items()}
        failed = {k: v for k, v in failures.items() if v}
        details = "all checks hold" if not failed else "; ".join(f"{k}: {v}" for k, v in failed.items())
        return Verdict((len(checks) - len(failed)) / len(checks), details)
