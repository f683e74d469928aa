"""Hostile MCP stdio servers (tests/mcp_hostile_server.py) called through the toolset as a task does: a
10 MB answer is cut to tools.max_output_chars; a server that exits is restarted for the next call, a
bounded number of times in a row, and the calls that hit it dead are tool errors; and the same through the
real CLI and the mock model, which calls every MCP tool once per task."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import read_jsonl, run_cli, write_dataset

from hermes_exp.errors import ToolError
from hermes_exp.tools.base import Resources, ToolContext
from hermes_exp.tools.mcp import McpTool, discover, server_specs

pytest.importorskip("mcp", reason="pip install 'hermes-exp[mcp]'")
SERVER = str(Path(__file__).with_name("mcp_hostile_server.py"))


@pytest.fixture
def tools(tmp_path: Path) -> Iterator[tuple[dict[str, McpTool], ToolContext, Path]]:
    starts = tmp_path / "starts"
    settings = {"mcp": {"servers": {"bad": {"command": sys.executable, "args": [SERVER, str(starts), "big", "flaky",
                                                                                  "crash"]}}}}
    spec = server_specs(settings)[0]
    found = discover(settings)["bad"]
    ctx = ToolContext(sandbox=None, limits={"max_output_chars": 1000}, resources=Resources(), task=Resources())
    starts.write_text("")  # discovery's start is not counted
    yield {t["name"]: McpTool(spec, t) for t in found}, ctx, starts
    ctx.task.close()
    ctx.resources.close()


def test_a_flood_is_cut_to_max_output_chars(tools) -> None:
    by_name, ctx, _ = tools
    out = by_name["big"](ctx, {"chars": 10_000_000})
    assert out["truncated"] is True
    assert len(out["content"]) < 1200 and "x" * 600 in out["content"]
    assert len(json.dumps(out)) < 2500, "the structured copy of the text must be bounded too"


def test_a_server_that_exits_is_restarted_for_the_next_call(tools) -> None:
    by_name, ctx, starts = tools
    first = by_name["flaky"](ctx, {})["content"]
    assert first.endswith("call=1")
    with pytest.raises(ToolError, match="exited"):  # the call that killed it: an error the model sees
        by_name["flaky"](ctx, {})
    again = by_name["flaky"](ctx, {})["content"]  # a new process, for this call and the next tasks'
    assert again.endswith("call=1") and again.split()[0] != first.split()[0]
    assert len(starts.read_text().split()) == 2


def test_restarts_in_a_row_are_bounded(tools) -> None:
    by_name, ctx, starts = tools
    errors = []
    for _ in range(6):
        with pytest.raises(ToolError) as info:
            by_name["crash"](ctx, {})
        errors.append(str(info.value))
    assert len(starts.read_text().split()) == 4  # the first start and 3 restarts, then no more
    assert all("exited" in e for e in errors[:4])
    assert "not started again" in errors[4] and "not started again" in errors[5]


@pytest.mark.slow
def test_a_run_keeps_flood_and_crash_out_of_its_rows(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"task {i}"} for i in range(3)])
    done = run_cli(tmp_path, f"dataset.path={data}", "run_name=hostile", "num_workers=1", "sandbox=local",
                   "distribution=terminal_only", "+distribution.toolsets.bad=100", "tools.max_output_chars=5000",
                   f"+mcp.servers.bad.command={sys.executable}", f"+mcp.servers.bad.args=['{SERVER}','{starts}',flood,flaky]",
                   timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = read_jsonl(tmp_path / "outputs/hostile/trajectories.jsonl")
    flaky = [row["tool_stats"]["mcp_bad_flaky"] for row in rows]
    assert [s["failure"] for s in flaky] == [0, 1, 0]  # the second task's call killed it; the third's ran again
    assert all(s["count"] == 1 for s in flaky)
    assert len(starts.read_text().split()) == 3  # discovery, the first start, one restart
    floods = [turn["value"] for row in rows for turn in row["conversations"] if "mcp_bad_flood" in turn["value"]
              and turn["from"] == "tool"]
    assert len(floods) == 3 and all(len(text) < 12_000 for text in floods)
    assert (tmp_path / "outputs/hostile/ledger.db").stat().st_size < 2_000_000
