"""A tiny MCP server for the tests (the official SDK's MCPServer, formerly FastMCP).

usage: python tests/mcp_server.py stdio [MARKER [STARTS]] | python tests/mcp_server.py http PORT
"""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("hx-test")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def whoami() -> str:
    """The server's process id and the value of HX_MCP_SECRET in its environment."""
    return f"pid={os.getpid()} secret={os.environ.get('HX_MCP_SECRET', '')}"


@server.tool(name="read-header")
def read_header(name: str, ctx: Context) -> str:
    """A header of the HTTP request that carried this call (empty over stdio)."""
    return (ctx.headers or {}).get(name.lower(), "")


@server.tool()
def fail(message: str) -> str:
    """Always fails with `message`."""
    raise ValueError(message)


if __name__ == "__main__":
    if len(sys.argv) > 3:  # stdio MARKER STARTS: each start appends a line to the file STARTS
        with open(sys.argv[3], "a", encoding="utf-8") as starts:
            starts.write(f"{os.getpid()}\n")
    if sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
