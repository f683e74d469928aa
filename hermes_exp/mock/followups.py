"""The mock model's turns for tools whose arguments come from an earlier result: a background process
(started, then waited for by its session_id) and the browser (a page opened, then its form filled in and
submitted by the element references of its snapshot). Placeholders like "{{session_id}}" or
"{{ref:textbox}}" are filled from the previous turn's tool results, as a real model would read them."""

from __future__ import annotations

import json
import re
from typing import Any

Call = tuple[str, dict[str, Any]]
# A page costs a real Chromium context: the mock browses only when the prompt asks for it.
BROWSING = re.compile(r"\b(brows\w*|web ?pages?|forms?|web ?sites?|sites?)\b", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"^\{\{(session_id|ref:[a-z]+)\}\}$")


def steps(tools: list[str], site: str | None, prompt: str = "") -> list[list[Call]]:
    """Turns (each a list of parallel calls) for the offered tools; the browser visits `site` when the
    prompt speaks of browsing, pages, forms or sites."""
    first: list[Call] = []
    second: list[Call] = []
    # Hermes's background-process tool, under either name Hermes has given it (tools.names)
    manager = next((name for name in ("process", "process_manage") if name in tools), None)
    if manager and "terminal" in tools:
        first.append(("terminal", {"command": "echo background job started; sleep 0.2; echo background job done",
                                   "background": True}))
        second.append((manager, {"action": "wait", "session_id": "{{session_id}}", "timeout": 10}))
    if site and BROWSING.search(prompt) and {"browser_navigate", "browser_type", "browser_click"} <= set(tools):
        first.append(("browser_navigate", {"url": site}))
        second += [("browser_type", {"ref": "{{ref:textbox}}", "text": "Hermes"}),
                   ("browser_click", {"ref": "{{ref:button}}"})]
        if "browser_vision" in tools:  # a look at the page the form answered with, labels on
            second.append(("browser_vision", {"question": "What does the page show?", "annotate": True}))
    return [s for s in (first, second) if s]


_SAMPLES = {"integer": 2, "number": 1.5, "boolean": True, "string": "hermes", "array": [], "object": {}}


def mcp_steps(raw_tools: Any) -> list[list[Call]]:
    """One turn calling every offered MCP tool (`mcp_*`) once, its required arguments made up from its
    JSON schema (2 for an integer, "hermes" for a string, ...)."""
    calls: list[Call] = []
    for tool in raw_tools if isinstance(raw_tools, list) else []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not str(fn.get("name", "")).startswith("mcp_"):
            continue
        params = fn.get("parameters") if isinstance(fn.get("parameters"), dict) else {}
        props = params.get("properties") if isinstance(params.get("properties"), dict) else {}
        args = {name: _SAMPLES.get((props.get(name) or {}).get("type"), "hermes")
                for name in params.get("required") or [] if isinstance(name, str)}
        calls.append((fn["name"], args))
    return [calls] if calls else []


def fill(args: dict[str, Any], results: list[str]) -> dict[str, Any]:
    """`args` with each placeholder replaced by what the earlier results say (left as is if absent)."""
    filled = {}
    for key, value in args.items():
        match = _PLACEHOLDER.match(value) if isinstance(value, str) else None
        filled[key] = (_lookup(match.group(1), results) or value) if match else value
    return filled


def _lookup(what: str, results: list[str]) -> str | None:
    for text in reversed(results):
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, TypeError):
            continue
        if not isinstance(data, dict):
            continue
        if what == "session_id" and isinstance(data.get("session_id"), str):
            return data["session_id"]
        if what.startswith("ref:") and isinstance(data.get("snapshot"), str):
            found = re.search(rf"- {what[4:]}\b[^\n]*\[ref=((?:f\d+)?e\d+)\]", data["snapshot"])
            if found:
                return "@" + found.group(1)
    return None
