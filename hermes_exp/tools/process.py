"""Hermes's `process` tool (toolset `terminal`): manage commands started with terminal(background=true)
in the prompt's sandbox: list, poll new output, read the log, wait, kill, write/submit stdin, close it."""

from __future__ import annotations

import time
from typing import Any

from hermes_exp.errors import ToolError
from hermes_exp.sandbox.background import Background
from hermes_exp.sandbox.base import Sandbox
from hermes_exp.tools.timeouts import clamp_timeout

ACTIONS = ("list", "poll", "log", "wait", "kill", "write", "submit", "close")
PROCESS = {
    "name": "process",
    "description": (
        "Manage background processes started with terminal(background=true). "
        "Actions: 'list' (show all), 'poll' (check status + new output), "
        "'log' (full output with pagination), 'wait' (block until done or timeout), "
        "'kill' (terminate), 'write' (send raw stdin data without newline), "
        "'submit' (send data + Enter, for answering prompts), 'close' (close stdin/send EOF)."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": list(ACTIONS),
                       "description": "Action to perform on background processes"},
            "session_id": {"type": "string", "description": "Process session ID (from terminal background output). "
                                                           "Required for all actions except 'list'."},
            "data": {"type": "string",
                     "description": "Text to send to process stdin (for 'write' and 'submit' actions)"},
            "timeout": {"type": "integer", "minimum": 1,
                        "description": "Max seconds to block for 'wait' action. Returns partial output on timeout."},
            "offset": {"type": "integer", "description": "Line offset for 'log' action (default: last 200 lines)"},
            "limit": {"type": "integer", "minimum": 1, "description": "Max lines to return for 'log' action"},
        },
        "required": ["action"],
    },
}


def start(sandbox: Sandbox, command: str) -> dict[str, Any]:
    """terminal(background=true): what Hermes answers when a background process starts."""
    spawn = getattr(sandbox, "spawn", None)
    if spawn is None:
        raise ToolError(f"this sandbox ({type(sandbox).__name__}) cannot run background processes")
    proc = spawn(command)
    return {"output": "Background process started", "session_id": proc.id, "exit_code": 0, "error": None}


def _status(proc: Background) -> dict[str, Any]:
    code = proc.exit_code()
    return {"session_id": proc.id, "command": proc.command, "status": "running" if code is None else "exited",
            "exit_code": code}


def _int(args: dict[str, Any], name: str, default: int | None) -> int | None:
    value = args.get(name, default)
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ToolError(f"'{name}' must be an integer, got {value!r}") from None


def process(sandbox: Sandbox, args: dict[str, Any], limits: dict[str, Any]) -> dict[str, Any]:
    action = args.get("action")
    if action not in ACTIONS:
        raise ToolError(f"unknown action {action!r}; use one of: {', '.join(ACTIONS)}")
    table = getattr(sandbox, "background", None)
    if table is None:
        raise ToolError(f"this sandbox ({type(sandbox).__name__}) cannot run background processes")
    if action == "list":
        return {"processes": [_status(p) for p in table.all()], "error": None}
    session_id = args.get("session_id")
    if not isinstance(session_id, (str, int)) or str(session_id) == "":
        raise ToolError(f"'session_id' is required for action {action!r}")
    proc = table.get(str(session_id))
    max_chars = int(limits.get("max_output_chars", 20000))
    if action in ("write", "submit"):
        data = args.get("data")
        if not isinstance(data, str):
            raise ToolError(f"'data' must be a string for action {action!r}")
        payload = (data + "\n" if action == "submit" else data).encode("utf-8")
        proc.write(payload)
        return {"session_id": proc.id, "bytes_written": len(payload), "error": None}
    if action == "close":
        proc.close_stdin()
        return {"session_id": proc.id, "stdin": "closed", "error": None}
    if action == "kill":
        proc.kill()
        return {**_status(proc), "status": "killed", "error": None}
    if action == "log":
        lines, total = proc.log.tail_lines(_int(args, "offset", None), _int(args, "limit", 200) or 200, max_chars)
        return {**_status(proc), "output": "\n".join(lines), "total_lines": total, "error": None}
    timed_out = False
    if action == "wait":
        timed_out = _wait(proc, clamp_timeout(args.get("timeout", 30), float(limits.get("terminal_timeout", 60))))
    output, truncated = proc.log.read_new(max_chars)
    return {**_status(proc), "output": output, "truncated": truncated, "timed_out": timed_out, "error": None}


def _wait(proc: Background, timeout: float) -> bool:
    """Block until the process exits or `timeout` seconds pass; True on timeout (not an error)."""
    wait_ended = getattr(proc, "wait_ended", None)  # a host process: asleep until it exits
    if wait_ended is not None:
        return not wait_ended(timeout)
    deadline = time.monotonic() + max(timeout, 0.0)
    step = 0.05
    while proc.exit_code() is None:
        if time.monotonic() >= deadline:
            return True
        time.sleep(min(step, max(deadline - time.monotonic(), 0.0)))
        step = min(step * 2, 0.5)
    return False


class Process:
    """`process` (the Tool protocol of tools/base.py): the background processes of the task's sandbox."""

    schema = PROCESS

    def missing(self, mock: bool) -> str | None:
        return None

    def __call__(self, ctx: Any, args: dict[str, Any]) -> dict[str, Any]:
        return process(ctx.sandbox, args, ctx.limits)
