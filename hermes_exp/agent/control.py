"""Control agents for task authors, chosen by `conf/agent/`: `oracle` runs the row's `solution` in the
sandbox instead of a model (0 model calls), `nop` does nothing; both are then verified as usual, and
statistics list the tasks whose oracle fails or whose nop passes as broken.

Row fields (the API a dataset adapter, e.g. Harbor task folders, builds on):
  solution:       str                      the shell command that solves the task (run in the workdir)
  solution_files: {path: content} | folder copied into the workdir only for agent=oracle
  solution_dir:   str                      where solution_files go instead (Harbor: "/solution", a
                                           container path; hermes_exp/dataset/readers/harbor.py)
"""

from __future__ import annotations

import json
from typing import Any

from hermes_exp.agent.loop import Outcome
from hermes_exp.sandbox.base import Sandbox
from hermes_exp.stops import Stop
from hermes_exp.sandbox.files import put_files

AGENTS = ("model", "oracle", "nop")


def agent_kind(settings: dict[str, Any]) -> str:
    return str((settings.get("agent") or {}).get("kind", "model"))


def _opening(settings: dict[str, Any], row: dict[str, Any]) -> list[dict[str, Any]]:
    system = settings.get("system_prompt")
    return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": row["prompt"]}]


def run_nop(settings: dict[str, Any], row: dict[str, Any]) -> Outcome:
    messages = _opening(settings, row) + [{"role": "assistant", "content": ""}]
    return Outcome(messages=messages, completed=True, stop_reason=Stop.NOP)


def run_oracle(sandbox: Sandbox, settings: dict[str, Any], row: dict[str, Any], base_dir: str) -> Outcome:
    """The solution as one terminal call, so the trajectory reads like an agent's (and `checks` apply)."""
    messages = _opening(settings, row)
    solution = row.get("solution")
    if not isinstance(solution, str) or not solution.strip():
        messages.append({"role": "assistant", "content": "agent=oracle: this row has no `solution`"})
        return Outcome(messages=messages, stop_reason=Stop.ORACLE_NO_SOLUTION)
    put_files(sandbox, row.get("solution_files"), base_dir, str(row.get("solution_dir") or ""), "solution_files")
    timeout = float((settings.get("agent") or {}).get("timeout_seconds", 600))
    task_seconds = (settings.get("limits") or {}).get("task_seconds")
    timeout = min(timeout, float(task_seconds)) if task_seconds else timeout
    done = sandbox.exec(solution, timeout=timeout)
    call = {"id": "oracle_0", "type": "function",
            "function": {"name": "terminal", "arguments": json.dumps({"command": solution})}}
    content = json.dumps({"output": done.output, "exit_code": done.exit_code,
                          "error": f"timed out after {timeout:g}s" if done.timed_out else None})
    messages += [{"role": "assistant", "content": "", "tool_calls": [call]},
                 {"role": "tool", "tool_call_id": "oracle_0", "name": "terminal", "content": content},
                 {"role": "assistant", "content": f"agent=oracle: the solution exited {done.exit_code}"}]
    failed = done.exit_code != 0 or done.timed_out
    return Outcome(messages=messages, completed=True, stop_reason=Stop.ORACLE_RAN,
                   tool_calls=[{"name": "terminal", "failed": failed, "offered": True, "seconds": 0.0}])
