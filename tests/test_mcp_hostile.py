"""Hostile MCP stdio servers (tests/mcp_hostile_server.py) called through the toolset as a task does: a
10 MB answer is cut to tools.max_output_chars; a server that exits is restarted for the next call, a
bounded number of times in a row, and the calls that hit it dead are tool errors."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_exp.errors import ToolError
from hermes_exp.tools.base import Resources, ToolContext
from hermes_exp.tools.mcp import McpTool, discover, server_specs

pytest.importorskip("mcp", reason="pip install 'hermes-exp[mcp]'")
SERVER = str(Path(__file__).with_name("mcp_hostile_server.py"))


@pytest.fixture
def tools(tmp_path: Path) -> Iterator[tuple[dict[str, McpTool], ToolContext, Path]]:
    starts = tmp_path / "starts"
    settings = {"mcp": {"servers": {"bad": {"command": sys.executable, "args": [SERVER, str(starts)]}}}}
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
