"""Tool names (`tools.names`): the one map from a tool's name in hermes-exp's toolsets to the name a run
offers it under. The registry offers and dispatches by it, so trajectories, `tool_stats`, the
`hallucinated_tools` filter and `--list-toolsets` carry the offered names; the `checks` verifier resolves
a grader's tool name through it, so a grader written for either set reads the other set's calls.

`hermes`: the names Hermes used until August 2026 (the default; a run that does not set it keeps its
identity). `hermes-2026-09`: Hermes's renamed core tools of 29 August 2026 (NousResearch/hermes-agent
toolsets.py: `process_manage`, `todo_list`, `cronjob_manage`). Toolset names do not change."""

from __future__ import annotations

import re
from typing import Any

from hermes_exp.errors import ConfigError
from hermes_exp.settings.resolved import DEFAULT_TOOL_NAMES

NAME_SETS: dict[str, dict[str, str]] = {
    DEFAULT_TOOL_NAMES: {},
    "hermes-2026-09": {"process": "process_manage", "todo": "todo_list", "cronjob": "cronjob_manage"},
}
# Every name any set offers, back to the tool's own name (its key in conf/toolset/*.yaml).
_OWN = {offered: own for renames in NAME_SETS.values() for own, offered in renames.items()}


def name_set(settings: dict[str, Any]) -> str:
    """The run's `tools.names` (the default when unset, as in snapshots of earlier runs)."""
    chosen = (settings.get("tools") or {}).get("names")
    chosen = DEFAULT_TOOL_NAMES if chosen is None else chosen
    if chosen not in NAME_SETS:
        raise ConfigError(f"tools.names={chosen!r} is not a known set of tool names",
                          f"set tools.names to one of {', '.join(NAME_SETS)} (the default: {DEFAULT_TOOL_NAMES})")
    return str(chosen)


def renames(settings: dict[str, Any]) -> dict[str, str]:
    """own name -> offered name, for the tools the run's set renames."""
    return NAME_SETS[name_set(settings)]


def offered_name(name: str, settings: dict[str, Any]) -> str:
    """The name under which this run offers the tool a grader calls `name` (in any set's names)."""
    own = _OWN.get(name, name)
    return renames(settings).get(own, own)


def in_text(text: str, renames: dict[str, str]) -> str:
    """`text` (a schema's description, an error of ours) with its mentions of a renamed tool (`process(...`,
    `the process tool`) in the offered name, so a run never tells the model to call a name it lacks."""
    for own, offered in renames.items():
        text = re.sub(rf"\b{re.escape(own)}(?=\(| tool\b)", offered, text)
    return text


def in_schema(schema: Any, renames: dict[str, str]) -> Any:
    """A tool schema with every string in it passed through `in_text` (a copy; the tool's own is kept)."""
    if isinstance(schema, str):
        return in_text(schema, renames)
    if isinstance(schema, dict):
        return {key: in_schema(value, renames) for key, value in schema.items()}
    if isinstance(schema, list):
        return [in_schema(value, renames) for value in schema]
    return schema
