"""What an invocation imports before it knows it has work: asyncio (and ssl through it) only by what starts an
event loop (an MCP session, the browser). Fresh interpreters, so nothing imported by the test process counts."""

from __future__ import annotations

import json
import os
import subprocess
import sys

HEAVY = ("asyncio", "ssl", "hermes_exp.tools.aloop", "hermes_exp.tools.mcp_client")

READ_MCP_SETTINGS = """
import json, sys
import hermes_exp.cli.app, hermes_exp.run.invocation
from hermes_exp.tools import mcp
conf = {"mcp": {"servers": {"calc": {"command": "calc-server", "args": ["stdio"], "env": {"T": "HX_T"}},
                            "web": {"url": "http://127.0.0.1:9/mcp"}}},
        "mcp_tools": {"calc": [{"name": "add", "description": "Add", "input_schema": {}}]}}
specs = mcp.server_specs(conf)
tools = mcp.mcp_tools(conf)
seen = {"specs": [s.name for s in specs], "tools": {k: sorted(v) for k, v in tools.items()},
        "missing": tools["calc"]["mcp_calc_add"].missing(False),
        "imported": sorted(m for m in %r if m in sys.modules)}
print(json.dumps(seen))
""" % (HEAVY,)


def _fresh(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "HX_T"})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_reading_mcp_settings_imports_no_event_loop() -> None:
    seen = _fresh(READ_MCP_SETTINGS)
    assert seen["specs"] == ["calc", "web"]
    assert seen["tools"] == {"calc": ["mcp_calc_add"], "web": []}
    assert seen["missing"] == "MCP server 'calc' needs environment variable(s) HX_T"
    assert seen["imported"] == []


def test_the_client_module_still_offers_the_spec() -> None:
    from hermes_exp.tools import mcp_client, mcp_spec

    assert mcp_client.ServerSpec is mcp_spec.ServerSpec and mcp_client.tool_name is mcp_spec.tool_name
