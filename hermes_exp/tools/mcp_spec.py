"""One MCP server as config says (`mcp.servers.<name>`): a stdio `command` + `args` + `env` (values are the
NAMES of environment variables), or a streamable-HTTP `url` + `headers` (+ `headers_env`, names again).
Plain settings only: reading them (config checks, listings, a run with nothing to do) imports neither
asyncio nor the SDK; the live session is tools/mcp_client.py."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from hermes_exp.settings.sections import Section
from hermes_exp.errors import ConfigError

_KEYS = {"command", "args", "env", "cwd", "url", "headers", "headers_env", "per_task", "timeout", "startup_timeout"}


@dataclass(frozen=True)
class ServerSpec:
    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)  # variable in the server -> variable of the runner
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    headers_env: dict[str, str] = field(default_factory=dict)  # header -> variable holding its value
    per_task: bool = False
    timeout: float = 60.0
    startup_timeout: float = 30.0

    @classmethod
    def from_config(cls, name: str, conf: Any) -> ServerSpec:
        key = f"mcp.servers.{name}"
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", name):
            raise ConfigError(f"{key}: a server name must be letters, digits, '_' or '-' (it names a toolset)",
                              f"rename it, e.g. mcp.servers.{re.sub(r'[^A-Za-z0-9_]', '_', name) or 'server'}")
        if not isinstance(conf, dict) or bool(conf.get("command")) == bool(conf.get("url")):
            raise ConfigError(f"{key} needs exactly one of `command` (stdio) or `url` (streamable HTTP)",
                              f"e.g. {key}.command=npx {key}.args=[-y,@modelcontextprotocol/server-everything]")
        section = Section(key, conf).only(_KEYS, f"valid keys: {', '.join(sorted(_KEYS))}")
        section.flag("per_task", nullable=True)
        if conf.get("url") and conf.get("per_task"):
            raise ConfigError(f"{key}.per_task applies to stdio servers only", f"remove {key}.per_task")
        strs = lambda v: {str(k): str(x) for k, x in (v or {}).items()}  # noqa: E731
        return cls(name, conf.get("command"), tuple(str(a) for a in conf.get("args") or ()), strs(conf.get("env")),
                   conf.get("cwd"), conf.get("url"), strs(conf.get("headers")), strs(conf.get("headers_env")),
                   bool(conf.get("per_task")), float(section.number("timeout", 60, positive=True)),
                   float(section.number("startup_timeout", 30, positive=True)))

    def missing_variables(self) -> list[str]:
        return sorted(v for v in {**self.env, **self.headers_env}.values() if v not in os.environ)

    def check(self) -> None:
        """Fail before any work if a variable the server needs is not set."""
        names = self.missing_variables()
        if names:
            raise ConfigError(f"MCP server {self.name!r} needs environment variable(s) {', '.join(names)}",
                              f"export {names[0]}=... (mcp.servers.{self.name} names the variables, never values)")


def tool_name(server: str, tool: str) -> str:
    """Hermes's naming of MCP tools: mcp_<server>_<tool>, anything but [A-Za-z0-9_] as '_'."""
    clean = lambda s: re.sub(r"[^A-Za-z0-9_]", "_", s)  # noqa: E731
    return f"mcp_{clean(server)}_{clean(tool)}"
