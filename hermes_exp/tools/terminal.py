"""Toolset `terminal`: run a shell command in the prompt's sandbox."""

from __future__ import annotations

from typing import Any

from hermes_exp.errors import ToolError
from hermes_exp.sandbox.base import Sandbox
from hermes_exp.tools.base import ToolContext
from hermes_exp.tools.process import start
from hermes_exp.tools.timeouts import clamp_timeout

# One argument of a new process may hold at most 128 KiB on Linux (MAX_ARG_STRLEN): stay below it.
MAX_COMMAND_BYTES = 100_000

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
    if "\x00" in command:
        raise ToolError("'command' contains a NUL byte, which no shell command can hold; remove it")
    size = len(command.encode("utf-8", "surrogatepass"))
    if size > MAX_COMMAND_BYTES:
        raise ToolError(f"'command' is {size} bytes, more than the {MAX_COMMAND_BYTES} a command may have; "
                        "put long content in a file with write_file and run that instead")
    if args.get("background") is True:
        return start(sandbox, command)
    timeout = clamp_timeout(args.get("timeout"), float(limits.get("terminal_timeout", 60)))
    result = sandbox.exec(command, timeout=timeout)
    error = f"command timed out after {timeout:g}s" if result.timed_out else None
    return {"output": result.output, "exit_code": result.exit_code, "error": error}


class Terminal:
    """`terminal`: a shell command in the prompt's sandbox (no backend to configure)."""

    schema = TERMINAL

    def missing(self, mock: bool) -> str | None:
        return None

    def __call__(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        return terminal(ctx.sandbox, args, ctx.limits)
