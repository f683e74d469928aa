"""MCP servers as toolsets: each server under `mcp.servers.<name>` becomes the toolset `<name>`, whose tools
(`mcp_<name>_<tool>`, Hermes's naming) are discovered once at start-up. A stdio server runs once per worker
process, or once per task with `per_task: true`; every one is stopped when its owner closes."""

from __future__ import annotations

from typing import Any

from hermes_exp.errors import ConfigError, ToolError
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
        connection = owner.get(key, lambda: Connection(self.spec, loop).start(), Connection.stop)
        if not connection.alive:  # the server exited: start it again for this call and the next ones
            owner.drop(key)
            connection = owner.get(key, lambda: Connection(self.spec, loop).start(), Connection.stop)
        return connection.call(self.remote, args)


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
