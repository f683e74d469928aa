"""Toolset `terminal`: run a shell command in the prompt's sandbox."""

from __future__ import annotations

from typing import Any

from hermes_exp.errors import ToolError
from hermes_exp.sandbox.base import Sandbox
from hermes_exp.tools.process import start

TERMINAL = {
    "name": "terminal",
    "description": (
        "Run a shell command in your private working directory and return its combined stdout and "
        "stderr and exit code. Commands that run longer than the timeout are killed."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The shell command to run (/bin/sh -c)."},
            "timeout": {"type": "integer", "description": "Seconds before the command is killed."},
            "background": {"type": "boolean", "description": "Start it in the background and return a session_id "
                                                             "at once; manage it with the process tool."},
        },
        "required": ["command"],
    },
}


def terminal(sandbox: Sandbox, args: dict[str, Any], limits: dict[str, Any]) -> dict[str, Any]:
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ToolError("'command' must be a non-empty string")
    if args.get("background") is True:
        return start(sandbox, command)
    max_timeout = float(limits.get("terminal_timeout", 60))
    timeout = args.get("timeout", max_timeout)
    if not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ToolError("'timeout' must be a positive number of seconds")
    result = sandbox.exec(command, timeout=min(float(timeout), max_timeout))
    error = f"command timed out after {min(float(timeout), max_timeout):g}s" if result.timed_out else None
    return {"output": result.output, "exit_code": result.exit_code, "error": error}
