"""A hostile MCP stdio server for the tests: one tool floods its caller, one kills
the server on its second call, one on every call.

usage: python tests/mcp_hostile_server.py [STARTS]   (each start appends its pid to the file STARTS)
"""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("hx-hostile")
CALLS = {"flaky": 0}


@server.tool()
def big(chars: int) -> str:
    """`chars` characters of text."""
    return "x" * chars


@server.tool()
def flaky() -> str:
    """Answers its first call in a process; the process exits during its second."""
    CALLS["flaky"] += 1
    if CALLS["flaky"] == 2:
        os._exit(3)
    return f"pid={os.getpid()} call={CALLS['flaky']}"


@server.tool()
def crash() -> str:
    """Exits the server on every call."""
    os._exit(4)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        with open(sys.argv[1], "a", encoding="utf-8") as starts:
            starts.write(f"{os.getpid()}\n")
    server.run("stdio")
