"""Hermes's function-calling system turn for ShareGPT rows (`outputs.sharegpt.system=hermes`).

The wording is a format to stay compatible with: it is what Hermes Agent writes into every trajectory
(`convert_to_trajectory_format` and `format_tools_for_system_message` in NousResearch/hermes-agent),
byte for byte, with the JSON signatures of the tools offered to the sample inside `<tools>`."""

from __future__ import annotations

import json
from typing import Any

SYSTEM_MODES = ("hermes", "sent")

_HEAD = (
    "You are a function calling AI model. You are provided with function signatures within <tools> </tools> XML tags. "
    "You may call one or more functions to assist with the user query. If available tools are not relevant in assisting "
    "with user query, just respond in natural conversational language. Don't make assumptions about what values to plug "
    "into functions. After calling & executing the functions, you will be provided with function results within "
    "<tool_response> </tool_response> XML tags. Here are the available tools:\n"
)
_TAIL = (
    "For each function call return a JSON object, with the following pydantic model json schema for each:\n"
    "{'title': 'FunctionCall', 'type': 'object', 'properties': {'name': {'title': 'Name', 'type': 'string'}, "
    "'arguments': {'title': 'Arguments', 'type': 'object'}}, 'required': ['name', 'arguments']}\n"
    "Each function call should be enclosed within <tool_call> </tool_call> XML tags.\n"
    "Example:\n<tool_call>\n{'name': <function-name>,'arguments': <args-dict>}\n</tool_call>"
)


def tool_signatures(tools: list[dict[str, Any]]) -> str:
    """The `<tools>` body: name, description, parameters and Hermes's `"required": null` per tool."""
    if not tools:
        return "[]"
    return json.dumps([{"name": t["function"]["name"], "description": t["function"].get("description", ""),
                        "parameters": t["function"].get("parameters", {}), "required": None}
                       for t in tools], ensure_ascii=False)


def hermes_system(tools: list[dict[str, Any]], sent_system: str | None = None) -> str:
    """Hermes's system turn for these tools, then the system prompt really sent (without its
    ephemeral part) after a blank line, so the row also carries the instructions the model had."""
    return signed_system(tool_signatures(tools), sent_system)


def signed_system(signatures: str, sent_system: str | None = None) -> str:
    """hermes_system for the `<tools>` body `tool_signatures` made."""
    fixed = f"{_HEAD}<tools>\n{signatures}\n</tools>\n{_TAIL}"
    return f"{fixed}\n\n{sent_system}" if sent_system else fixed
