"""The model's `timeout` argument never lifts `tools.terminal_timeout`: a real `sleep` on every backend,
with the values a hostile or broken model sends (Python's JSON parser accepts NaN and Infinity)."""

from __future__ import annotations

import json

import pytest

from hermes_exp.tools.base import Resources
from hermes_exp.tools.process import Process
from hermes_exp.tools.registry import Registry, Toolset
from hermes_exp.tools.terminal import Terminal
from hermes_exp.tools.timeouts import clamp_timeout
from hermes_exp.tools.toolbox import Toolbox

LIMIT = 1.0
REGISTRY = Registry([Toolset("terminal", tools={"terminal": Terminal(), "process": Process()})])


def call_tool(sandbox, name: str, raw: str, offered: list[str], limits: dict) -> tuple[str, bool]:
    return Toolbox(REGISTRY, sandbox, limits, Resources()).call(name, raw, offered)


HOSTILE = ["NaN", "Infinity", "-Infinity", "-5", "0", "1e308", "1e400", "99999999999999999999999", "\"30\"", "true"]


@pytest.mark.parametrize("raw", HOSTILE)
def test_clamp_turns_every_unusable_value_into_the_limit(raw: str) -> None:
    assert clamp_timeout(json.loads(raw), LIMIT) == LIMIT
    assert clamp_timeout(0.25, LIMIT) == 0.25  # a shorter timeout the model asks for is kept


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "-5", "1e308"])
def test_hostile_timeout_is_clamped_on_a_real_sandbox(sandbox, raw: str) -> None:
    args = '{"command": "sleep 30; echo survived", "timeout": %s}' % raw
    content, valid = call_tool(sandbox, "terminal", args, ["terminal"], {"terminal_timeout": LIMIT})
    result = json.loads(content)
    assert valid and result["exit_code"] == 124, result
    assert result["error"] == f"command timed out after {LIMIT:g}s" and "survived" not in result["output"]


@pytest.mark.parametrize("raw", ["Infinity", "1e400"])
def test_hostile_wait_timeout_is_clamped_on_a_real_sandbox(sandbox, raw: str) -> None:
    limits = {"terminal_timeout": LIMIT}
    started, _ = call_tool(sandbox, "terminal", '{"command": "sleep 30", "background": true}',
                           ["terminal", "process"], limits)
    session = json.loads(started)["session_id"]
    args = '{"action": "wait", "session_id": "%s", "timeout": %s}' % (session, raw)
    content, valid = call_tool(sandbox, "process", args, ["terminal", "process"], limits)
    result = json.loads(content)
    assert valid and result["timed_out"] is True and result["error"] is None, result
