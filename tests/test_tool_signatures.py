"""Tool signatures in every row: Hermes's function-calling system turn, byte for byte, listing the
tools really sent to each sample, and a `tools` column in every output format."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import read_jsonl, run_cli, write_dataset

from hermes_exp.store.hermes_prompt import hermes_system

TOOLS = [
    {"type": "function", "function": {
        "name": "web_search", "description": "Search the web — returns results",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}},
    {"type": "function", "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}}},
]
# What Hermes Agent's convert_to_trajectory_format writes for TOOLS (written out by hand from its source).
HERMES_TURN = (
    "You are a function calling AI model. You are provided with function signatures within <tools> </tools> XML "
    "tags. You may call one or more functions to assist with the user query. If available tools are not relevant "
    "in assisting with user query, just respond in natural conversational language. Don't make assumptions about "
    "what values to plug into functions. After calling & executing the functions, you will be provided with "
    "function results within <tool_response> </tool_response> XML tags. Here are the available tools:\n<tools>\n"
    '[{"name": "web_search", "description": "Search the web — returns results", "parameters": {"type": "object", '
    '"properties": {"query": {"type": "string"}}, "required": ["query"]}, "required": null}, {"name": "noop", '
    '"description": "", "parameters": {"type": "object", "properties": {}}, "required": null}]\n</tools>\n'
    "For each function call return a JSON object, with the following pydantic model json schema for each:\n"
    "{'title': 'FunctionCall', 'type': 'object', 'properties': {'name': {'title': 'Name', 'type': 'string'}, "
    "'arguments': {'title': 'Arguments', 'type': 'object'}}, 'required': ['name', 'arguments']}\n"
    "Each function call should be enclosed within <tool_call> </tool_call> XML tags.\n"
    "Example:\n<tool_call>\n{'name': <function-name>,'arguments': <args-dict>}\n</tool_call>")


def test_hermes_system_turn_is_byte_identical_for_a_fixed_tool_list() -> None:
    assert hermes_system(TOOLS) == HERMES_TURN
    assert hermes_system(TOOLS, "Be brief.") == HERMES_TURN + "\n\nBe brief."
    assert hermes_system([]).count("<tools>\n[]\n</tools>") == 1


def _tools_block(system: str) -> list[str]:
    body = system.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0]
    return [t["name"] for t in json.loads(body)]


def test_each_row_lists_exactly_the_tools_sent_to_it(tmp_path: Path, mock_server) -> None:
    rows = [{"prompt": f"Task {i}: count words"} for i in range(10)]
    data = write_dataset(tmp_path / "p.jsonl", rows)
    args = [f"dataset.path={data}", "run_name=sig", "distribution=balanced", "system_prompt=SENT-SYSTEM",
            "ephemeral_system_prompt=EPHEMERAL", f"model.base_url={mock_server.base_url}",
            "outputs.formats=[sharegpt,openai]"]
    result = run_cli(tmp_path, *args)
    assert result.returncode == 0, result.stderr
    sent = {}  # prompt -> the tools list of its requests, as they reached the wire
    for line in (tmp_path / "requests.jsonl").read_text().splitlines():
        body = json.loads(line)["body"]
        if "tools" not in body:
            continue  # a tool's own model call (vision_analyze), not an agent turn
        prompt = body["messages"][1]["content"]
        assert sent.setdefault(prompt, body["tools"]) == body["tools"]
    out = tmp_path / "outputs" / "sig"
    trajectories = read_jsonl(out / "trajectories.jsonl")
    assert len(trajectories) == 10
    for row in trajectories:
        wire = sent[row["conversations"][1]["value"]]
        assert json.loads(row["tools"]) == wire
        system = row["conversations"][0]["value"]
        assert system == hermes_system(wire, "SENT-SYSTEM") and "EPHEMERAL" not in system
        assert _tools_block(system) == [t["function"]["name"] for t in wire]
    draws = {tuple(r["toolsets_used"]): _tools_block(r["conversations"][0]["value"]) for r in trajectories}
    assert len(draws) >= 2 and len({tuple(v) for v in draws.values()}) == len(draws)  # different draws differ
    for record in read_jsonl(out / "trajectories.openai.jsonl"):
        assert json.loads(record["tools"]) == sent[record["messages"][1]["content"]]

    again = run_cli(tmp_path, *args, "action=export", "outputs.sharegpt.system=sent")
    assert again.returncode == 0, again.stderr
    for row in read_jsonl(out / "trajectories.jsonl"):
        assert row["conversations"][0] == {"from": "system", "value": "SENT-SYSTEM"}
        assert json.loads(row["tools"]) == sent[row["conversations"][1]["value"]]


def test_an_unknown_system_mode_is_refused_before_any_work(tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "hi"}])
    result = run_cli(tmp_path, f"dataset.path={data}", f"model.base_url={mock_server.base_url}",
                     "outputs.sharegpt.system=chatml")
    assert result.returncode == 2
    assert "outputs.sharegpt.system='chatml'" in result.stderr and "hermes, sent" in result.stderr
    assert not (tmp_path / "requests.jsonl").exists()


def test_tool_texts_are_made_once_per_list_and_never_mixed_up() -> None:
    """The export keeps one tool list's texts for every sample sent it (sharegpt.sent_tools): rows of
    two lists, interleaved, each get their own, the same as made afresh."""
    from hermes_exp.store.hermes_prompt import tool_signatures
    from hermes_exp.store.sharegpt import sent_tools

    lists = [TOOLS, TOOLS[:1], [{"type": "function", "function": {"name": "é", "parameters": {}}}]]
    for n in range(9):
        tools = lists[n % 3]
        text, signatures = sent_tools({"tools": json.dumps(tools, ensure_ascii=False)}, {})
        assert text == json.dumps(tools, ensure_ascii=False) and signatures == tool_signatures(tools)
    assert sent_tools({"tools": json.dumps(TOOLS)}, {})[0] == json.dumps(TOOLS, ensure_ascii=False)  # as rows carry it
