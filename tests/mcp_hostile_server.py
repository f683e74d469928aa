"""A hostile MCP stdio server for the tests: one tool floods its caller, one kills
the server on its second call, one on every call.

usage: python tests/mcp_hostile_server.py STARTS [TOOL ...]   (each start appends its pid to the file STARTS;
with TOOLs, only those tools are served)
"""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("hx-hostile")
CALLS = {"flaky": 0}


def big(chars: int) -> str:
    """`chars` characters of text."""
    return "x" * chars


def flaky() -> str:
    """Answers its first call in a process; the process exits during its second."""
    CALLS["flaky"] += 1
    if CALLS["flaky"] == 2:
        os._exit(3)
    return f"pid={os.getpid()} call={CALLS['flaky']}"


def crash() -> str:
    """Exits the server on every call."""
    os._exit(4)


def flood() -> str:
    """Ten million characters of text."""
    return "y" * 10_000_000


if __name__ == "__main__":
    with open(sys.argv[1], "a", encoding="utf-8") as starts:
        starts.write(f"{os.getpid()}\n")
    for tool in (big, flaky, crash, flood):
        if len(sys.argv) == 2 or tool.__name__ in sys.argv[2:]:
            server.tool()(tool)
    server.run("stdio")
