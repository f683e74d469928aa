"""One MCP server as config says (`mcp.servers.<name>`): a stdio `command` + `args` + `env` (values are the
NAMES of environment variables), or a streamable-HTTP `url` + `headers` (+ `headers_env`, names again),
and a live session with it through the official `mcp` SDK, kept open on a LoopThread until stopped."""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Any

from hermes_exp.config_section import Section
from hermes_exp.errors import ConfigError, ToolError
from hermes_exp.tools.aloop import LoopThread

INSTALL_HINT = "pip install 'hermes-exp[mcp]' (the official MCP SDK)"
_KEYS = {"command", "args", "env", "cwd", "url", "headers", "headers_env", "per_task", "timeout", "startup_timeout"}


def _sdk() -> Any:
    try:
        import mcp
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client
    except ImportError as exc:
        raise ConfigError("mcp.servers needs the `mcp` package (version 2)", INSTALL_HINT) from exc
    return mcp, StdioServerParameters, stdio_client, streamable_http_client, create_mcp_http_client


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


class Connection:
    """A live session with one server (a stdio server is a child process for exactly as long)."""

    def __init__(self, spec: ServerSpec, loop: LoopThread) -> None:
        self.spec, self._loop = spec, loop
        self.tools: list[dict[str, Any]] = []  # {name, description, input_schema} as the server lists them
        self._session: Any = None
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[Any] | None = None
        self._stderr = tempfile.TemporaryFile(mode="w+", prefix="hx-mcp-")  # a stdio server's stderr

    def start(self) -> Connection:
        self.spec.check()

        async def open_() -> None:
            ready = asyncio.get_running_loop().create_future()
            self._task = asyncio.ensure_future(self._serve(ready))  # owns the transport until stop()
            await asyncio.wait_for(asyncio.shield(ready), self.spec.startup_timeout)

        try:
            self._loop.run(open_(), self.spec.startup_timeout + 5)
        except Exception as exc:
            tail = self.stderr_tail()
            self.stop()
            raise ToolError(f"MCP server {self.spec.name!r} did not start: {_why(exc)}{tail}") from exc
        return self

    async def _serve(self, ready: asyncio.Future[Any]) -> None:
        mcp, params, stdio_client, http_client, make_http = _sdk()
        self._stop = asyncio.Event()
        try:
            if self.spec.command:
                env = {k: os.environ[v] for k, v in self.spec.env.items()}
                transport = stdio_client(params(command=self.spec.command, args=list(self.spec.args), env=env,
                                                cwd=self.spec.cwd), errlog=self._stderr)
            else:
                headers = {**self.spec.headers, **{k: os.environ[v] for k, v in self.spec.headers_env.items()}}
                transport = http_client(self.spec.url, http_client=make_http(headers=headers))
            async with transport as (read, write), mcp.ClientSession(read, write) as session:
                await session.initialize()
                listed = await session.list_tools()
                self.tools = [{"name": t.name, "description": t.description or "",
                               "input_schema": dict(t.input_schema or {"type": "object", "properties": {}})}
                              for t in listed.tools]
                self._session = session
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            if not isinstance(exc, (Exception, asyncio.CancelledError)):
                raise
        finally:
            self._session = None

    @property
    def alive(self) -> bool:
        return self._session is not None and self._task is not None and not self._task.done()

    def stderr_tail(self, chars: int = 600) -> str:
        """The end of a stdio server's stderr, for error messages ('' when it wrote nothing)."""
        try:
            self._stderr.flush()
            size = self._stderr.seek(0, os.SEEK_END)
            self._stderr.seek(max(0, size - chars))
            tail = self._stderr.read().strip()
        except (OSError, ValueError):
            return ""
        return f"; its stderr ends with: {tail}" if tail else ""

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if self._session is None:
            raise ToolError(f"MCP server {self.spec.name!r} is not connected (it exited or never started)")
        try:
            result = self._loop.run(self._session.call_tool(tool, arguments), self.spec.timeout)
        except Exception as exc:
            raise ToolError(f"MCP server {self.spec.name!r}, tool {tool!r}: {_why(exc)}") from exc
        return _result(result)

    def stop(self) -> None:
        """End the session; the SDK closes the stdio server's stdin and terminates it. Safe twice."""
        task, self._task = self._task, None
        if task is None:
            return

        async def close() -> None:
            if self._stop is not None:
                self._stop.set()
            try:
                await asyncio.wait_for(task, 15)
            except BaseException:  # noqa: BLE001 - a server that died already is stopped
                task.cancel()

        try:
            self._loop.run(close(), 20)
        except Exception:  # noqa: BLE001 - stopping must not mask the run's own outcome
            pass
        self._stderr.close()


def _result(result: Any) -> dict[str, Any]:
    """A CallToolResult as the model sees it: the text parts joined, structured content if any."""
    texts = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(block.text)
        elif kind in ("image", "audio"):
            texts.append(f"[{kind}: {getattr(block, 'mime_type', '')}]")
        elif kind == "resource_link":
            texts.append(f"[resource: {getattr(block, 'uri', '')}]")
    content = "\n".join(texts)
    out: dict[str, Any] = {"content": content, "error": (content or "the tool reported an error")
                           if getattr(result, "is_error", False) else None}
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        out["structured"] = structured
    return out


def _why(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__
