"""A live session with one MCP server (tools/mcp_spec.py: what config says of it) through the official
`mcp` SDK, kept open on a LoopThread until stopped."""

from __future__ import annotations

import asyncio
import os
import tempfile
from typing import Any

from hermes_exp.errors import ConfigError, ToolError
from hermes_exp.tools.aloop import LoopThread
from hermes_exp.tools.mcp_spec import ServerSpec, tool_name

__all__ = ["Connection", "ServerSpec", "tool_name"]
INSTALL_HINT = "pip install 'hermes-exp[mcp]' (the official MCP SDK)"


def _sdk() -> Any:
    try:
        import mcp
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client
    except ImportError as exc:
        raise ConfigError("mcp.servers needs the `mcp` package (version 2)", INSTALL_HINT) from exc
    return mcp, StdioServerParameters, stdio_client, streamable_http_client, create_mcp_http_client


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
            async with transport as (read, write), mcp.ClientSession(_Watched(read, self._stop), write) as session:
                await session.initialize()
                listed = await session.list_tools()
                self.tools = [{"name": t.name, "description": t.description or "",
                               "input_schema": dict(t.input_schema or {"type": "object", "properties": {}})}
                              for t in listed.tools]
                self._session = session
                ready.set_result(None)
                await self._stop.wait()  # set by stop(), or by _Watched when the server hangs up
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            if not isinstance(exc, (Exception, asyncio.CancelledError)):
                raise
        finally:
            self._session = None

    @property
    def alive(self) -> bool:
        stopping = self._stop is not None and self._stop.is_set()  # set first when the server hangs up
        return self._session is not None and self._task is not None and not self._task.done() and not stopping

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
            gone = "" if self.alive else f" (the server exited{self.stderr_tail()})"
            raise ToolError(f"MCP server {self.spec.name!r}, tool {tool!r}: {_why(exc)}{gone}") from exc
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


class _Watched:
    """The transport's read stream (the SDK's ReadStream protocol), which sets `gone` when it ends: the
    server hung up (a stdio server exited). The session itself does not say so, so without this a dead
    server's connection would look alive until the run ends and would never be restarted."""

    def __init__(self, stream: Any, gone: asyncio.Event) -> None:
        self._stream, self._gone = stream, gone

    @property
    def last_context(self) -> Any:  # the SDK reads the sender's context this way (duck-typed)
        return getattr(self._stream, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._stream.receive()
        except Exception:
            self._gone.set()
            raise

    async def aclose(self) -> None:
        await self._stream.aclose()

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._stream.__anext__()
        except StopAsyncIteration:
            self._gone.set()
            raise

    async def __aenter__(self) -> _Watched:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._stream.__aexit__(*exc)


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
