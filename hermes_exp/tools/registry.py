"""The registry of a run's toolsets and tools, built from config: schemas offered to the model, and
dispatch of a call.

How a toolset plugs in
----------------------
1. Write each tool as a class with an explicit `schema`, `missing(mock)` and `__call__(ctx, args)`
   (the `Tool` Protocol in tools/base.py), in one module per toolset (`tools/web.py`, ...).
2. Name the classes in `conf/toolset/<name>.yaml`, one entry per tool, keyed by the tool's name::

       description: search the web and read pages
       tools:
         web_search: {_target_: hermes_exp.tools.web.WebSearch, timeout: 15, ...}

   Backend settings (URLs, the NAMES of key variables, limits, timeouts) sit beside `_target_` and go to
   the constructor. Add the toolset to `defaults` in conf/config.yaml (`- toolset@toolsets.<name>: <name>`)
   or per run with `+toolset@toolsets.<name>=<name>`, and draw it from a distribution.
3. Resources: a constructor opens nothing. What tools of a worker process share (an HTTP client, a
   browser process, an MCP stdio server) is opened lazily with `ctx.resources.get(key, open, close)` and
   closed by `worker.release` at the end of the run; what belongs to one task (a browser context, a
   background process) goes to `ctx.task.get(...)` and is closed right before the task's sandbox,
   whatever happened. A resource that died is dropped with `.drop(key)` and reopened on next use.
4. Discovered tools (MCP): build a `Toolset` from what the servers list at start-up and `add` it to the
   registry before its `known_tools` are read; everything downstream (schemas, dispatch, statistics)
   only sees the registry.

The tools known to a run (the keys of every row's `tool_stats`) are those of every toolset defined for
it, computed once per run, so all rows of a run, and runs of different distributions, share one schema.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


from hermes_exp.errors import ConfigError, ToolError
from hermes_exp.tools import names
from hermes_exp.tools.base import Tool, ToolContext
from hermes_exp.settings.instantiation import construct


@dataclass
class Toolset:
    name: str
    description: str = ""
    tools: dict[str, Tool] = field(default_factory=dict)


class Registry:
    """Every toolset a run can draw, with its tools. A tool name may appear in several toolsets
    (Hermes's `browser` also offers `web_search`) only with the same settings."""

    def __init__(self, toolsets: Iterable[Toolset] = (), renames: dict[str, str] | None = None) -> None:
        self.toolsets: dict[str, Toolset] = {}
        self.renames = dict(renames or {})  # own name -> offered name (tools.names, tools/names.py)
        self._tools: dict[str, Tool] = {}
        self._schemas: dict[str, dict[str, Any]] = {}  # offered name -> the schema offered under it
        self._origin: dict[str, tuple[str, Any]] = {}
        self._lists: dict[tuple[str, ...], list[dict[str, Any]]] = {}  # schemas() per draw
        for toolset in toolsets:
            self.add(toolset)

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> Registry:
        config = settings.get("toolsets") or {}
        registry = cls(renames=names.renames(settings))
        for name, conf in config.items():
            if conf is not None:
                registry.add(_build(str(name), conf), conf)
        from hermes_exp.tools.mcp import mcp_tools  # discovered at start-up, passed in settings.mcp_tools

        for server, tools in mcp_tools(settings).items():
            if server in registry.toolsets:
                raise ConfigError(f"MCP server {server!r} has the name of a toolset already defined",
                                  f"rename mcp.servers.{server} (its name is its toolset's name)")
            registry.add(Toolset(server, f"tools of the MCP server {server!r}", dict(tools)))
        return registry

    def add(self, toolset: Toolset, conf: dict[str, Any] | None = None) -> None:
        """Add a toolset (from config, or discovered at start-up, e.g. an MCP server's tools), its tools
        under the names the run offers them by (`renames`)."""
        offered: dict[str, Tool] = {}
        for name, tool in toolset.tools.items():
            spec = ((conf or {}).get("tools") or {}).get(name, id(tool))
            if name in self._origin and self._origin[name][1] != spec:
                first = self._origin[name][0]
                raise ConfigError(
                    f"tool {name!r} is defined differently in toolsets {first!r} and {toolset.name!r}",
                    f"define it once and reference it: toolsets.{toolset.name}.tools.{name}: "
                    f"${{toolsets.{first}.tools.{name}}}")
            self._origin.setdefault(name, (toolset.name, spec))
            as_offered = self.renames.get(name, name)
            offered[as_offered] = tool
            self._tools.setdefault(as_offered, tool)
            self._schemas.setdefault(as_offered, names.in_schema({**tool.schema, "name": as_offered}, self.renames)
                                     if self.renames else tool.schema)
        self.toolsets[toolset.name] = Toolset(toolset.name, toolset.description, offered)
        self._lists.clear()

    @property
    def known_tools(self) -> list[str]:
        return list(self._tools)

    def schemas(self, toolsets: Iterable[str]) -> list[dict[str, Any]]:
        """The OpenAI `tools` list for these toolsets, in a stable order, each tool once: one list per
        draw, the same object for every task of that draw (read, never changed, by its users), so a
        run's sessions share it and its serialisation (model/encode.py)."""
        draw = tuple(toolsets)
        tools = self._lists.get(draw)
        if tools is None:
            names = dict.fromkeys(n for ts in draw if ts in self.toolsets for n in self.toolsets[ts].tools)
            tools = self._lists[draw] = [{"type": "function", "function": self._schemas[n]} for n in names]
        return tools

    def call(self, ctx: ToolContext, name: str, raw_args: str | None, offered: list[str]) -> tuple[str, bool]:
        """Run one tool call; return the JSON string the model sees and whether the call was valid.

        Unknown tools and unparsable arguments become error results naming what is valid: the
        model's own output is never rewritten. Sandbox failures propagate (they end the task)."""
        if name not in offered or name not in self._tools:
            return _invalid(f"unknown tool {name!r}; the tools you can call are: {', '.join(offered) or 'none'}")
        try:
            args = json.loads(raw_args or "{}")
        except json.JSONDecodeError as exc:
            return _invalid(f"arguments for {name} are not valid JSON ({exc.msg}); send a JSON object. "
                            f"Valid tools: {', '.join(offered)}")
        if not isinstance(args, dict):
            return _invalid(f"arguments for {name} must be a JSON object")
        try:
            return json.dumps(self._tools[name](ctx, args), ensure_ascii=False), True
        except ToolError as exc:
            return json.dumps({"error": names.in_text(str(exc), self.renames)}, ensure_ascii=False), True


def _build(name: str, conf: dict[str, Any]) -> Toolset:
    if not isinstance(conf, dict) or not isinstance(conf.get("tools"), dict) or not conf["tools"]:
        raise ConfigError(f"toolsets.{name} must have a `tools` mapping of tool name -> {{_target_: ...}}",
                          f"see conf/toolset/terminal.yaml for the shape of conf/toolset/{name}.yaml")
    tools: dict[str, Tool] = {}
    for tool_name, spec in conf["tools"].items():
        key = f"toolsets.{name}.tools.{tool_name}"
        tool = construct(spec, key, f"check {key}._target_ and its settings (conf/toolset/{name}.yaml)", _convert_="all")
        declared = (getattr(tool, "schema", None) or {}).get("name")
        if declared != tool_name:
            raise ConfigError(f"{key} builds a tool whose schema is named {declared!r}",
                              f"key the tool by its schema name: toolsets.{name}.tools.{declared}")
        tools[str(tool_name)] = tool
    return Toolset(name, str(conf.get("description") or ""), tools)


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
