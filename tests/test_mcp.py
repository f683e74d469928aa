"""MCP servers through the official SDK: a tiny MCPServer (tests/mcp_server.py) over stdio and over
streamable HTTP, its tools discovered and called; secrets passed by variable name; servers gone after stop
(checked in the process list)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_exp.errors import ConfigError
from hermes_exp.tools.aloop import LoopThread
from hermes_exp.tools.mcp import discover, server_specs
from hermes_exp.tools.mcp_client import Connection, ServerSpec, tool_name

pytest.importorskip("mcp", reason="pip install 'hermes-exp[mcp]'")
SERVER = str(Path(__file__).with_name("mcp_server.py"))


def stdio(**extra) -> dict:
    return {"command": sys.executable, "args": [SERVER, "stdio"], **extra}


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def loop() -> Iterator[LoopThread]:
    thread = LoopThread("test-mcp")
    yield thread
    thread.stop()


def test_stdio_tools_discovered_and_called(loop: LoopThread, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HX_TEST_TOKEN", "tok-123")
    spec = ServerSpec.from_config("calc", stdio(env={"HX_MCP_SECRET": "HX_TEST_TOKEN"}))
    conn = Connection(spec, loop).start()
    try:
        assert [t["name"] for t in conn.tools] == ["add", "whoami", "read-header", "fail"]
        add = next(t for t in conn.tools if t["name"] == "add")
        assert add["input_schema"]["required"] == ["a", "b"] and "Add two" in add["description"]
        assert conn.call("add", {"a": 2, "b": 40}) == {"content": "42", "error": None, "structured": {"result": 42}}
        who = conn.call("whoami", {})["content"]
        assert "secret=tok-123" in who  # the value of the variable the config names
        failed = conn.call("fail", {"message": "nope"})
        assert failed["error"]
        assert conn.call("add", {"a": "not a number"})["error"]  # refused by the server's argument check
        pid = int(who.split()[0].removeprefix("pid="))
        assert pid_alive(pid)
    finally:
        conn.stop()
        conn.stop()  # twice is harmless
    assert gone(pid), "the stdio server outlived stop()"


def test_discover_names_toolsets_and_fails_early(monkeypatch: pytest.MonkeyPatch) -> None:
    found = discover({"mcp": {"servers": {"calc": stdio()}}})
    assert list(found) == ["calc"] and [t["name"] for t in found["calc"]][:2] == ["add", "whoami"]
    assert tool_name("calc", "read-header") == "mcp_calc_read_header"
    monkeypatch.delenv("HX_NOT_SET", raising=False)
    with pytest.raises(ConfigError, match="HX_NOT_SET"):
        discover({"mcp": {"servers": {"calc": stdio(env={"X": "HX_NOT_SET"})}}})
    with pytest.raises(ConfigError, match="'broken' did not start.*no-such-module-here"):
        discover({"mcp": {"servers": {"broken": {"command": sys.executable, "args": ["-m", "no-such-module-here"],
                                                 "startup_timeout": 20}}}})


@pytest.mark.parametrize("conf, message", [
    ({}, "exactly one of `command`"),
    ({"command": "x", "url": "http://y"}, "exactly one of `command`"),
    ({"command": "x", "colour": "red"}, "unknown keys"),
    ({"url": "http://y", "per_task": True}, "stdio servers only"),
])
def test_bad_server_config_names_the_key(conf: dict, message: str) -> None:
    with pytest.raises(ConfigError, match="mcp.servers.s") as info:
        server_specs({"mcp": {"servers": {"s": conf}}})
    assert message in str(info.value)


@pytest.fixture
def http_server() -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([sys.executable, SERVER, "http", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(10)


def test_streamable_http_with_headers(loop: LoopThread, http_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HX_TEST_AUTH", "Bearer s3cret")
    spec = ServerSpec.from_config("remote", {"url": http_server, "headers": {"X-Client": "hermes-exp"},
                                             "headers_env": {"Authorization": "HX_TEST_AUTH"}})
    conn = Connection(spec, loop).start()
    try:
        assert "add" in [t["name"] for t in conn.tools]
        assert conn.call("add", {"a": 1, "b": 2})["content"] == "3"
        assert conn.call("read-header", {"name": "X-Client"})["content"] == "hermes-exp"
        assert conn.call("read-header", {"name": "Authorization"})["content"] == "Bearer s3cret"
    finally:
        conn.stop()
