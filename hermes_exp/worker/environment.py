"""`preflight=oracle`, in a worker: one environment checked before any model call, in a fresh sandbox of
the run's kind: the row's fixtures, its reference solution (agent=oracle's), then its verifier. Without a
solution the verifier runs on the untouched sandbox (agent=nop's): scoring 0 there is expected, a verifier
that cannot even start is not. Returns plain data; the parent keeps it in the ledger."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from hermes_exp.agent.control import run_oracle
from hermes_exp.agent.limits import for_row
from hermes_exp.dataset.tasks import Task
from hermes_exp.verify.base import Score
from hermes_exp.verify.scoring import Plan, run_plan
from hermes_exp.worker.fixtures import prepare
from hermes_exp.worker.task import runtime_for

OK, BROKEN, UNCHECKED, FAILED = "ok", "broken", "unchecked", "failed"
TAIL = 1500  # characters of the verifier's output kept with a verdict: its end explains the score
CANNOT_START = (126, 127)  # the shell's "not executable" and "command not found"
_EXIT = re.compile(r"^exit (-?\d+);")


@dataclass
class EnvCheck:
    """One environment's verdict: ok, broken (never sent to the model), unchecked (its verifier does not
    run in a sandbox) or failed (the check itself could not run: the engine, an image build; not kept)."""

    env: str
    verdict: str
    why: str
    tail: str = ""
    seconds: float = 0.0


def check_environment(settings: dict[str, Any], task: Task) -> EnvCheck:
    """`task.key` is the environment's content key; `task.row` one of its rows."""
    started = time.monotonic()
    try:
        runtime = runtime_for(settings)
        plan = runtime.scorer.plan(task.row)
        if plan is None or not plan.needs_sandbox:
            kind = plan.kind if plan is not None else "none"
            check = EnvCheck(task.key, UNCHECKED, f"verifier={kind} does not run in the sandbox")
        else:
            check = _in_sandbox(runtime, plan, task, for_row(settings, task.row))
    except Exception as exc:  # infrastructure (engine down, image build): the task runs and meets it itself
        check = EnvCheck(task.key, FAILED, f"{type(exc).__name__}: {exc}"[:TAIL])
    check.seconds = round(time.monotonic() - started, 3)
    return check


def _in_sandbox(runtime: Any, plan: Plan, task: Task, settings: dict[str, Any]) -> EnvCheck:
    base = runtime.scorer.context.base_dir
    sandbox = runtime.sandboxes.open("preflight-" + task.key.rpartition(":")[2], task.row)
    try:
        prepare(sandbox, task.row, base, runtime.setup_timeout)
        solved = _has_solution(task.row)
        outcome = run_oracle(sandbox, settings, task.row, base) if solved else None
        sandbox.stop_processes()  # what the solution left running cannot write the reward file
        result = {"messages": outcome.messages if outcome else [], "tool_calls": outcome.tool_calls if outcome else []}
        score = run_plan(plan, sandbox, task.row, result)
    finally:
        sandbox.close()
    return judge(task.key, score, solved)


def _has_solution(row: dict[str, Any]) -> bool:
    solution = row.get("solution")
    return isinstance(solution, str) and bool(solution.strip())


def judge(env: str, score: Score, solved: bool) -> EnvCheck:
    """The verdict from the verifier's score: a solution must pass; without one, the verifier must run."""
    output = score.error or score.details or ""
    tail = output[-TAIL:]
    if solved:
        if score.error is None and score.passed:
            return EnvCheck(env, OK, f"the solution passes (reward {score.reward:g})", tail)
        why = f"reward {score.reward:g}" if score.error is None else _first_line(score.error)
        return EnvCheck(env, BROKEN, f"the reference solution does not pass: {why}", tail)
    if score.error is not None:
        return EnvCheck(env, BROKEN, f"no solution; the verifier cannot run on the untouched environment: "
                                     f"{_first_line(score.error)}", tail)
    status = exit_status(score.details or "")
    if status in CANNOT_START:
        return EnvCheck(env, BROKEN, f"no solution; the verifier cannot start on the untouched environment "
                                     f"(exit {status}: {'command not found' if status == 127 else 'not executable'})",
                        tail)
    return EnvCheck(env, OK, f"no solution; the verifier runs on the untouched environment (reward {score.reward:g})",
                    tail)


def exit_status(details: str) -> int | None:
    """The verify command's exit status, from the details verifier=command writes ("exit N; reward R")."""
    found = _EXIT.match(details)
    return int(found.group(1)) if found else None


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else "(no output)"
