"""MCP servers as toolsets: each server under `mcp.servers.<name>` becomes the toolset `<name>`, whose tools
(`mcp_<name>_<tool>`, Hermes's naming) are discovered once at start-up. A stdio server runs once per worker
process, or once per task with `per_task: true`; every one is stopped when its owner closes."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from hermes_exp.errors import ConfigError, ToolError
from hermes_exp.sandbox.base import truncate
from hermes_exp.tools.mcp_spec import ServerSpec, tool_name

# The live part (tools/mcp_client.py: asyncio, ssl, the SDK) is imported by what starts a server: a run
# without MCP servers, a settled run and the config checks read only the plain settings.


def server_specs(settings: dict[str, Any]) -> list[ServerSpec]:
    servers = ((settings.get("mcp") or {}).get("servers")) or {}
    if not isinstance(servers, dict):
        raise ConfigError("mcp.servers must be a mapping of server name -> settings",
                          "e.g. +mcp.servers.files.command=npx '+mcp.servers.files.args=[-y,some-mcp-server]'")
    return [ServerSpec.from_config(str(name), conf) for name, conf in servers.items()]


def discover(settings: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Start each server once, list its tools, stop it: {server: [{name, description, input_schema}]}.
    A server that does not start fails the run here, before any task, naming it and the fix."""
    specs = server_specs(settings)
    if not specs:
        return {}
    from hermes_exp.tools.aloop import LoopThread
    from hermes_exp.tools.mcp_client import Connection

    loop = LoopThread("hx-mcp-discovery")
    found: dict[str, list[dict[str, Any]]] = {}
    try:
        for spec in specs:
            try:
                connection = Connection(spec, loop).start()
            except ToolError as exc:
                raise ConfigError(str(exc), f"fix mcp.servers.{spec.name} (command/args/url), or remove it") from exc
            found[spec.name] = connection.tools
            connection.stop()
    finally:
        loop.stop()
    return found


class McpTool:
    """One discovered tool (the Tool protocol of tools/base.py). The connection it calls through is a
    shared resource of the worker process, or the task's own for a `per_task` server."""

    def __init__(self, spec: ServerSpec, listed: dict[str, Any]) -> None:
        self.spec, self.remote = spec, str(listed["name"])
        description = listed.get("description") or f"the {self.remote} tool"
        params = dict(listed.get("input_schema") or {})
        params.setdefault("type", "object")
        params.setdefault("properties", {})
        self.schema = {"name": tool_name(spec.name, self.remote),
                       "description": f"[MCP server {spec.name}] {description}", "parameters": params}

    def missing(self, mock: bool) -> str | None:
        names = self.spec.missing_variables()
        return f"MCP server {self.spec.name!r} needs environment variable(s) {', '.join(names)}" if names else None

    def __call__(self, ctx: Any, args: dict[str, Any]) -> dict[str, Any]:
        from hermes_exp.tools.aloop import LoopThread
        from hermes_exp.tools.mcp_client import Connection

        loop = ctx.resources.get("mcp:loop", lambda: LoopThread("hx-mcp"), LoopThread.stop)
        owner, key = (ctx.task if self.spec.per_task else ctx.resources), f"mcp:{self.spec.name}"
        restarts = owner.get(f"{key}:restarts", Restarts)
        opener = lambda: restarts.start(self.spec.name, lambda: Connection(self.spec, loop).start())  # noqa: E731
        connection = owner.get(key, opener, Connection.stop)
        if not connection.alive:  # the server exited since the last call
            restarts.died()
            owner.drop(key)
            connection = owner.get(key, opener, Connection.stop)
        try:
            out = connection.call(self.remote, args)
        except ToolError:
            if not connection.alive:  # this call killed it: the model hears so; the next call restarts it
                restarts.died()
                owner.drop(key)
            raise
        restarts.served()
        return _bounded(out, int(ctx.limits.get("max_output_chars", 20000)))


class Restarts:
    """Restarts of one server by one owner (a worker process, or a task for a `per_task` server). Each
    restart in a row waits twice as long as the one before (1, 2, 4 s); after MAX_RESTARTS in a row with
    no call served in between, the server is not started again and each call says so."""

    MAX_RESTARTS, FIRST_DELAY = 3, 1.0

    def __init__(self) -> None:
        self.count, self.dead, self._lock = 0, False, threading.Lock()

    def died(self) -> None:
        with self._lock:
            self.dead = True

    def served(self) -> None:
        with self._lock:
            self.count, self.dead = 0, False

    def start(self, name: str, start: Any) -> Any:
        with self._lock:
            if self.dead:
                self.count += 1
            count = self.count
        if count > self.MAX_RESTARTS:
            raise ToolError(f"MCP server {name!r} exited again after {self.MAX_RESTARTS} restarts in a row; it is not "
                            "started again in this worker, so its tools are unavailable: use other tools")
        if count:
            time.sleep(self.FIRST_DELAY * 2 ** (count - 1))
        try:
            return start()
        except ToolError:
            self.died()
            raise


def _bounded(out: dict[str, Any], limit: int) -> dict[str, Any]:
    """The result within tools.max_output_chars, as every other tool's: the text cut in the middle,
    structured content dropped (with a note) when its JSON alone is over the limit."""
    out = dict(out)
    for field in ("content", "error"):
        if isinstance(out.get(field), str):
            out[field], cut = truncate(out[field], limit)
            out["truncated"] = out.get("truncated", False) or cut
    if "structured" in out and len(json.dumps(out["structured"], ensure_ascii=False, default=str)) > limit:
        out["structured"] = f"[structured content over {limit:,} characters (tools.max_output_chars): dropped]"
        out["truncated"] = True
    if not out.get("truncated"):
        out.pop("truncated", None)
    return out


def mcp_tools(settings: dict[str, Any]) -> dict[str, dict[str, McpTool]]:
    """{server (toolset name): {tool name: McpTool}} for every configured server, from what discovery
    found (settings.mcp_tools; a server not discovered, e.g. in a listing, has no tools)."""
    found = settings.get("mcp_tools") or {}
    return {spec.name: {t.schema["name"]: t for t in (McpTool(spec, listed) for listed in found.get(spec.name, []))}
            for spec in server_specs(settings)}


def with_discovered(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings with `mcp_tools` filled in by discovery (unchanged when no server is configured)."""
    found = discover(settings)
    return {**settings, "mcp_tools": found} if found else settings
