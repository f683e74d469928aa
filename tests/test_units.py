"""Pure parts: the distribution draw, task keys, tool confinement, ShareGPT conversion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes_exp.dataset.tasks import task_key
from hermes_exp.tools.distribution import draw
from hermes_exp.errors import ToolError
from hermes_exp.sandbox.base import TRUNCATION_MARKER, confine, truncate
from hermes_exp.sandbox.local import LocalSandboxFactory
from hermes_exp.store.sharegpt import conversations, gpt_value
from hermes_exp.tools.base import Resources
from hermes_exp.tools.files import FileTool
from hermes_exp.tools.registry import Registry, Toolset, is_failure
from hermes_exp.tools.terminal import Terminal
from hermes_exp.tools.toolbox import Toolbox


def test_draw_frequencies_follow_probabilities() -> None:
    probs = {"terminal": 30.0, "file": 70.0}
    n = 4000
    draws = [draw(probs, 0, f"v1:{i}") for i in range(n)]
    assert all(d for d in draws)
    # P(terminal drawn) = 0.3, plus the fallback never picks it (file is more probable).
    assert abs(sum("terminal" in d for d in draws) / n - 0.30) < 0.03
    # P(file) = P(drawn) + P(nothing drawn, so the most probable is used) = 0.7 + 0.3 * 0.7.
    assert abs(sum("file" in d for d in draws) / n - (0.7 + 0.3 * 0.7)) < 0.03
    assert draws == [draw(probs, 0, f"v1:{i}") for i in range(n)]
    assert draws != [draw(probs, 1, f"v1:{i}") for i in range(n)]


def test_draw_always_gives_one_toolset() -> None:
    assert draw({"terminal": 0.0, "file": 1.0}, 3, "k") in (["file"],)
    assert all(draw({"terminal": 5.0, "file": 2.0}, 0, str(i)) for i in range(500))


def test_task_key_counts_duplicates_and_ignores_order() -> None:
    row = {"prompt": "same", "b": 1, "a": 2}
    assert task_key(row, 0, "id") == task_key({"a": 2, "b": 1, "prompt": "same"}, 0, "id")
    assert task_key(row, 0, "id") != task_key(row, 1, "id")
    assert task_key(row, 0, "id") != task_key(row, 0, "other")
    assert task_key(row, 0, "id").startswith("v1:")


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../b", ""])
def test_confine_refuses_escapes(path: str) -> None:
    with pytest.raises(ToolError):
        confine("/task", path)


def test_confine_accepts_inside() -> None:
    assert confine("/task", "a/b/../c.txt") == "a/c.txt"
    assert confine("/task", "/task/x") == "x"


def test_truncate_keeps_head_and_tail() -> None:
    text, cut = truncate("a" * 100 + "b" * 100, 50)
    assert cut and text.startswith("a") and text.endswith("b")
    assert TRUNCATION_MARKER.format(dropped=150) in text


@pytest.fixture
def sandbox(tmp_path: Path):
    box = LocalSandboxFactory(root=str(tmp_path), output_limit=300).open("v1:abc", {})
    yield box
    box.close()


def test_tools_through_the_registry(sandbox) -> None:
    offered = ["terminal", "read_file", "write_file", "patch", "search_files"]
    limits = {"terminal_timeout": 5, "max_output_chars": 1000}
    registry = Registry([Toolset("terminal", tools={"terminal": Terminal()}),
                         Toolset("file", tools={n: FileTool(n) for n in offered[1:]})])
    toolbox = Toolbox(registry, sandbox, limits, Resources())
    call_tool = lambda name, raw, offered: toolbox.call(name, raw, offered)  # noqa: E731

    def call(name: str, args) -> dict:
        raw = args if isinstance(args, str) else json.dumps(args)
        return json.loads(call_tool(name, raw, offered)[0])

    assert call("write_file", {"path": "d/x.txt", "content": "alpha\nbeta\n"})["error"] is None
    assert "2|beta" in call("read_file", {"path": "d/x.txt"})["content"]
    assert call("patch", {"path": "d/x.txt", "old_string": "beta", "new_string": "gamma"})["replacements"] == 1
    assert call("search_files", {"pattern": "gam+a"})["count"] == 1
    assert "outside the working directory" in call("read_file", {"path": "../../etc/passwd"})["error"]
    assert "not found" in call("patch", {"path": "d/x.txt", "old_string": "zzz", "new_string": ""})["error"]
    assert call("terminal", {"command": "exit 3"})["exit_code"] == 3
    slow = call("terminal", {"command": "sleep 30", "timeout": 1})
    assert slow["exit_code"] == 124 and "timed out" in slow["error"]
    big = call("terminal", {"command": "seq 1 100000"})
    assert "output truncated" in big["output"] and len(big["output"]) < 400
    content, valid = call_tool("browser", "{}", offered)
    assert not valid and "terminal, read_file" in json.loads(content)["error"]
    content, valid = call_tool("terminal", "{not json", offered)
    assert not valid and "not valid JSON" in json.loads(content)["error"]


def test_failure_rule_matches_hermes() -> None:
    assert is_failure('{"error": "x"}') and is_failure('{"success": false}') and is_failure("")
    assert is_failure("Error: boom") and not is_failure('{"error": null}') and not is_failure("ok")


def test_sharegpt_turns() -> None:
    messages = [
        {"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "reasoning": "plan",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{\"command\": \"ls\"}"}},
                        {"id": "c2", "type": "function", "function": {"name": "terminal", "arguments": "{bad"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "terminal", "content": "{\"output\": \"\"}"},
        {"role": "tool", "tool_call_id": "c2", "name": "terminal", "content": "plain"},
        {"role": "assistant", "content": "<think>inline</think>answer"},
        {"role": "assistant", "content": "no reasoning"},
    ]
    turns = conversations(messages)
    assert [t["from"] for t in turns] == ["system", "human", "gpt", "tool", "gpt", "gpt"]
    assert turns[2]["value"].startswith("<think>\nplan\n</think>\n\n<tool_call>\n")
    assert '"arguments": "{bad"' in turns[2]["value"]  # invalid arguments are kept as emitted
    assert turns[3]["value"].count("<tool_response>") == 2 and '"content": "plain"' in turns[3]["value"]
    assert turns[4]["value"] == "<think>inline</think>answer"
    assert gpt_value(messages[6]) == "<think>\n</think>\nno reasoning"
