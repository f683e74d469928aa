"""The registry of toolsets and tools: schemas offered to the model, and dispatch of a call."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hermes_exp.errors import ToolError
from hermes_exp.sandbox.base import Sandbox
from hermes_exp.tools import files, process, terminal

Handler = Callable[[Sandbox, dict[str, Any], dict[str, Any]], dict[str, Any]]

TOOLSETS: dict[str, dict[str, tuple[dict[str, Any], Handler]]] = {
    "terminal": {"terminal": (terminal.TERMINAL, terminal.terminal), "process": (process.PROCESS, process.process)},
    "file": {
        "read_file": (files.READ_FILE, files.read_file),
        "write_file": (files.WRITE_FILE, files.write_file),
        "patch": (files.PATCH, files.patch),
        "search_files": (files.SEARCH_FILES, files.search_files),
    },
}
KNOWN_TOOLS: list[str] = [name for tools in TOOLSETS.values() for name in tools]


def tool_schemas(toolsets: list[str]) -> list[dict[str, Any]]:
    """The OpenAI `tools` list for these toolsets, in a stable order."""
    return [{"type": "function", "function": TOOLSETS[ts][name][0]} for ts in toolsets for name in TOOLSETS[ts]]


def _handler(name: str) -> Handler | None:
    for tools in TOOLSETS.values():
        if name in tools:
            return tools[name][1]
    return None


def call_tool(sandbox: Sandbox, name: str, raw_args: str | None, offered: list[str],
              limits: dict[str, Any]) -> tuple[str, bool]:
    """Run one tool call; return the JSON string the model sees and whether the call was valid.

    Unknown tools and unparsable arguments become error results naming what is valid: the
    model's own output is never rewritten. Sandbox failures propagate (they end the task)."""
    if name not in offered:
        return _invalid(f"unknown tool {name!r}; the tools you can call are: {', '.join(offered) or 'none'}")
    try:
        args = json.loads(raw_args or "{}")
    except json.JSONDecodeError as exc:
        return _invalid(f"arguments for {name} are not valid JSON ({exc.msg}); send a JSON object. "
                        f"Valid tools: {', '.join(offered)}")
    if not isinstance(args, dict):
        return _invalid(f"arguments for {name} must be a JSON object")
    try:
        return json.dumps(_handler(name)(sandbox, args, limits), ensure_ascii=False), True
    except ToolError as exc:
        return json.dumps({"error": str(exc)}, ensure_ascii=False), True


def _invalid(message: str) -> tuple[str, bool]:
    return json.dumps({"error": message}, ensure_ascii=False), False


def is_failure(content: str) -> bool:
    """Hermes's rule: JSON with a non-null `error` or `success: false`, or text empty / 'error:'."""
    try:
        data = json.loads(content)
    except (json.JSONDecodeError, TypeError):
        text = (content or "").strip()
        return not text or text.lower().startswith("error:")
    if isinstance(data, dict):
        return data.get("error") is not None or data.get("success") is False
    return False
