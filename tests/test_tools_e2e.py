"""The browser, background processes and MCP servers through the real CLI and the mock model: the demo uses
them, MCP tools join the run's known tools (also for action=export), and after the run, or after Ctrl-C,
no Chromium and no MCP server is left running (checked in the host's process list)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import REPO, read_jsonl, run_cli, write_dataset

pytest.importorskip("mcp")
pytest.importorskip("playwright")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not shutil.which("chromium"), reason="apt-get install chromium")]
SERVER = str(REPO / "tests" / "mcp_server.py")
PROMPTS = [{"prompt": f"Browse the demo form and report what you find, case {i}."} for i in range(3)]


def with_marker(marker: str) -> list[str]:
    """Overrides adding an MCP server and a browser whose command lines carry `marker`."""
    return [f"+mcp.servers.calc.command={sys.executable}", f"+mcp.servers.calc.args=['{SERVER}',stdio,{marker}]",
            "+distribution.toolsets.calc=100", f"toolsets.browser.settings.args=['--no-sandbox','--hx-test={marker}']",
            "sandbox=local"]


def leftovers(marker: str) -> list[str]:
    """Command lines of live processes mentioning `marker` (the MCP server, Chromium and its children)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            except OSError:
                continue
            if marker in cmdline and "pytest" not in cmdline:
                found.append(f"{entry.name}: {cmdline[:120]}")
    return found


def test_demo_uses_browser_process_and_mcp_then_stops_them(tmp_path: Path) -> None:
    marker = f"hx-e2e-{uuid.uuid4().hex[:10]}"
    data = write_dataset(tmp_path / "p.jsonl", PROMPTS)
    done = run_cli(tmp_path, f"dataset.path={data}", "run_name=tb", *with_marker(marker), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = read_jsonl(tmp_path / "outputs/tb/trajectories.jsonl")
    assert len(rows) == 3
    used = {tool for row in rows for tool, s in row["tool_stats"].items() if s["count"]}
    assert {"process", "browser_navigate", "browser_type", "browser_click", "browser_vision", "mcp_calc_add"} <= used
    for row in rows:
        assert {"mcp_calc_add", "mcp_calc_whoami", "process", "browser_console"} <= set(row["tool_stats"])
        assert row["tool_stats"]["mcp_calc_add"] == {"count": 1, "success": 1, "failure": 0}
        tool_turns = "\n".join(c["value"] for c in row["conversations"] if c["from"] == "tool")
        assert "Thanks" in tool_turns and "background job done" in tool_turns
        if row["tool_stats"]["browser_vision"]["count"]:  # the screenshot went to the vision model
            assert "I see a 1280x720 PNG image" in tool_turns and ".browser/screenshot-1.png" in tool_turns
    assert leftovers(marker) == [], "a browser or MCP server outlived the run"
    again = run_cli(tmp_path, f"dataset.path={data}", "run_name=tb", "action=export", *with_marker(marker))
    assert again.returncode == 0, again.stderr[-2000:]
    stats = json.loads((tmp_path / "outputs/tb/statistics.json").read_text())
    assert stats["tool_statistics"]["mcp_calc_add"]["count"] == 3  # known to export without any server


def test_per_task_mcp_server_is_one_per_task(tmp_path: Path) -> None:
    marker = f"hx-e2e-{uuid.uuid4().hex[:10]}"
    data = write_dataset(tmp_path / "p.jsonl", PROMPTS)
    done = run_cli(tmp_path, f"dataset.path={data}", "run_name=pt", *with_marker(marker),
                   "+mcp.servers.calc.per_task=true",
                   "distribution=terminal_only", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    who = set()
    for row in read_jsonl(tmp_path / "outputs/pt/trajectories.jsonl"):
        for turn in row["conversations"]:
            for block in turn["value"].split("<tool_response>\n")[1:]:
                response = json.loads(block.split("\n</tool_response>")[0])
                if response["name"] == "mcp_calc_whoami":
                    who.add(response["content"]["content"].split()[0])
    assert len(who) == 3, who  # a server process of its own for each task
    assert leftovers(marker) == []


def test_ctrl_c_stops_browser_and_mcp_servers(tmp_path: Path) -> None:
    marker = f"hx-e2e-{uuid.uuid4().hex[:10]}"
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"Browse the demo site, case {i}."} for i in range(8)])
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "hermes_exp.cli", f"dataset.path={data}", "run_name=int",
                             "num_workers=2", "model.mock_server.latency_ms=700", *with_marker(marker)],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # wait until both the browser and the task's MCP server run
            running = leftovers(marker)
            if any("chromium" in p for p in running) and any("mcp_server.py" in p for p in running):
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the browser and MCP server never ran: {leftovers(marker)}")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
    finally:
        proc.kill()
    assert proc.returncode == 130, err[-3000:]
    deadline = time.monotonic() + 15
    while leftovers(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert leftovers(marker) == [], "a browser or MCP server outlived Ctrl-C"
