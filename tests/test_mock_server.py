"""The mock chat-completions server, exercised over real loopback HTTP with the real openai client."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import openai
import pytest
from openai import OpenAI

from hermes_exp.errors import ConfigError
from hermes_exp.mock.server import MockServer

REPO = Path(__file__).resolve().parents[1]
TOOL_NAMES = ["terminal", "read_file", "write_file", "patch", "search_files"]


def tools(*names: str) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": n, "description": f"the {n} tool",
                                              "parameters": {"type": "object", "properties": {}}}}
            for n in names]


def client_for(server: MockServer) -> OpenAI:
    return OpenAI(api_key="x", base_url=server.base_url, max_retries=0)


def run_agent(client: OpenAI, prompt: str, offered: list[str], max_steps: int = 10) -> tuple[list[Any], Any]:
    """A minimal agent loop that 'executes' every tool call with a fake result; returns (calls, last message)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}, {"role": "user", "content": prompt}]
    calls: list[Any] = []
    for _ in range(max_steps):
        reply = client.chat.completions.create(model="mock", messages=messages, tools=tools(*offered))
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            assert reply.choices[0].finish_reason == "stop"
            return calls, message
        assert reply.choices[0].finish_reason == "tool_calls"
        for call in message.tool_calls:
            calls.append(call)
            result = json.dumps({"output": f"fake output of {call.function.name}"})
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return calls, None


def raw_request(url: str, body: bytes | None = None) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def server() -> Any:
    with MockServer() as s:
        yield s


def test_default_plan_runs_every_offered_tool_then_quotes_results(server: MockServer) -> None:
    prompt = "It's $(whoami) `id`;\n count  these words and tell me more"
    calls, final = run_agent(client_for(server), prompt, TOOL_NAMES)
    assert [c.function.name for c in calls] == ["terminal", "write_file", "read_file", "search_files"]
    assert [c.id for c in calls] == ["call_0_0", "call_1_0", "call_2_0", "call_3_0"]
    command = json.loads(calls[0].function.arguments)["command"]
    shell = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    assert shell.stdout.strip() == "7"  # the first 40 characters, quoted so nothing in them is executed
    assert json.loads(calls[1].function.arguments) == {"path": "notes.md", "content": f"# Notes\n{prompt}\n"}
    assert final.content.startswith("Done. I ran 4 tools. Results:")
    assert "fake output of search_files" in final.content
    assert final.reasoning == final.reasoning_content and "final answer" in final.reasoning


def test_default_plan_skips_tools_not_offered_and_answers_without_tools(server: MockServer) -> None:
    calls, _ = run_agent(client_for(server), "hi", ["read_file"])
    assert [c.function.name for c in calls] == ["read_file"]
    calls, final = run_agent(client_for(server), "hi", [])
    assert calls == [] and final.content == "Done. I ran 0 tools."


def test_directives_are_the_whole_plan_in_order(server: MockServer) -> None:
    prompt = "Do this:\nRUN: ls -la /tmp\nWRITE: out.txt hello world\nREAD: out.txt\nRUN: pwd"
    calls, final = run_agent(client_for(server), prompt, TOOL_NAMES)
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("terminal", {"command": "ls -la /tmp"}),
        ("write_file", {"path": "out.txt", "content": "hello world"}),
        ("read_file", {"path": "out.txt"}),
        ("terminal", {"command": "pwd"}),
    ]
    assert final.content.startswith("Done. I ran 4 tools.")
    calls, _ = run_agent(client_for(server), prompt, ["read_file"])
    assert [c.function.name for c in calls] == ["read_file"]


def test_loop_never_finishes(server: MockServer) -> None:
    calls, final = run_agent(client_for(server), "RUN: date\nLOOP", TOOL_NAMES, max_steps=10)
    assert final is None and len(calls) == 10
    assert [json.loads(c.function.arguments)["command"] for c in calls[:3]] == ["date", "echo step 1", "echo step 2"]
    calls, final = run_agent(client_for(server), "LOOP", ["search_files"], max_steps=3)
    assert final is None and {c.function.name for c in calls} == {"search_files"}


def test_same_request_gives_same_response(server: MockServer) -> None:
    client = client_for(server)
    request = {"model": "mock", "messages": [{"role": "user", "content": "same"}], "tools": tools(*TOOL_NAMES)}
    first, second = (client.chat.completions.create(**request) for _ in range(2))
    assert first.id == second.id and first.choices[0].message == second.choices[0].message
    with MockServer(seed=0) as other:
        third = client_for(other).chat.completions.create(**request)
    assert third.choices[0].message == first.choices[0].message


def test_no_reasoning_rate_one_removes_reasoning() -> None:
    with MockServer(no_reasoning_rate=1.0) as s:
        reply = client_for(s).chat.completions.create(
            model="mock", messages=[{"role": "user", "content": "x"}], tools=tools("terminal"))
    message = reply.choices[0].message
    assert message.tool_calls and not hasattr(message, "reasoning") and not hasattr(message, "reasoning_content")
    assert reply.usage.completion_tokens_details.reasoning_tokens == 0


def test_bad_tool_rate_one_replaces_first_action() -> None:
    with MockServer(bad_tool_rate=1.0) as s:
        calls, final = run_agent(client_for(s), "hello", TOOL_NAMES)
    assert calls[0].function.name == "nonexistent_tool" and json.loads(calls[0].function.arguments) == {"x": 1}
    assert [c.function.name for c in calls[1:]] == ["write_file", "read_file", "search_files"]
    assert final is not None


def test_fail_rate_one_always_fails_with_both_error_kinds() -> None:
    statuses = set()
    with MockServer(fail_rate=1.0) as s:
        client = client_for(s)
        for i in range(12):
            with pytest.raises((openai.RateLimitError, openai.InternalServerError)) as info:
                client.chat.completions.create(model="mock", messages=[{"role": "user", "content": str(i)}])
            statuses.add(info.value.status_code)
            if info.value.status_code == 429:
                assert info.value.response.headers["retry-after"] == "0"
    assert statuses == {429, 500}


def test_fail_rate_half_succeeds_on_retry_and_counts_every_request() -> None:
    with MockServer(fail_rate=0.5, seed=3) as s:
        client = client_for(s)
        for attempt in range(1, 50):
            try:
                client.chat.completions.create(model="mock", messages=[{"role": "user", "content": "retry me"}])
                break
            except (openai.RateLimitError, openai.InternalServerError):
                continue
        assert attempt < 50 and s.request_count == attempt


def test_record_file_has_one_line_per_request_without_secrets(tmp_path: Path) -> None:
    record = tmp_path / "requests.jsonl"
    with MockServer(record_path=str(record)) as s:
        run_agent(client_for(s), "RUN: true", ["terminal"])
        raw_request(s.base_url + "/chat/completions", b"{not json")
        assert s.request_count == 3
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [line["status"] for line in lines] == [200, 200, 400]
    assert lines[0]["body"]["messages"][-1] == {"role": "user", "content": "RUN: true"}
    assert all("authorization" not in line["headers"] for line in lines)
    assert "user-agent" in lines[0]["headers"]


def test_errors_models_and_health(server: MockServer) -> None:
    root = server.base_url.removesuffix("/v1")
    assert raw_request(root + "/health") == (200, {"status": "ok"})
    status, body = raw_request(server.base_url + "/nope")
    assert status == 404 and body["error"]["code"] == "not_found"
    status, body = raw_request(server.base_url + "/chat/completions", b"[1, 2]")
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    client = client_for(server)
    assert [m.id for m in client.models.list()] == ["mock"]
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="mock", messages=[{"role": "user", "content": "x"}], stream=True)


def test_odd_requests_still_get_a_final_answer(server: MockServer) -> None:
    url = server.base_url + "/chat/completions"
    odd_bodies = [
        {},
        {"messages": "nope", "tools": {"x": 1}},
        {"messages": [1, {"role": "user", "content": [{"type": "text", "text": "RUN: ls"}, 7]}],
         "tools": [None, {"type": "function"}, {"function": {"name": 5}}], "max_tokens": 3},
        {"messages": [{"role": "user", "content": {"weird": True}}, {"role": "tool", "content": None}]},
    ]
    for body in odd_bodies:
        status, reply = raw_request(url, json.dumps(body).encode())
        assert status == 200 and reply["choices"][0]["finish_reason"] == "stop", body


def test_sixty_four_concurrent_clients(server: MockServer) -> None:
    results: list[int] = []

    def one(i: int) -> None:
        status, _ = raw_request(server.base_url + "/chat/completions",
                                json.dumps({"messages": [{"role": "user", "content": f"n{i}"}]}).encode())
        results.append(status)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [200] * 64 and server.request_count == 64


def test_rates_outside_zero_one_are_rejected() -> None:
    with pytest.raises(ConfigError, match="fail_rate=1.5"):
        MockServer(fail_rate=1.5)


def test_latency_and_stop_closes_pooled_connections() -> None:
    with MockServer(latency_ms=60) as s:
        client = client_for(s)
        started = time.monotonic()
        client.chat.completions.create(model="mock", messages=[{"role": "user", "content": "slow"}])
        assert time.monotonic() - started >= 0.06
        assert [m.id for m in client.models.list()] == ["mock"]  # over the pooled keep-alive connection
    with pytest.raises(openai.APIConnectionError):
        client.models.list()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_module_runs_as_a_process_and_stops_on_signal(sig: signal.Signals) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "hermes_exp.mock", "--port", "0", "--latency-ms", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        reply = OpenAI(api_key="x", base_url=base_url, max_retries=0).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}])
        assert reply.model == "m" and reply.choices[0].message.content.startswith("Done.")
        proc.send_signal(sig)
        assert proc.wait(timeout=5) == 0
        assert proc.stderr.read() == ""
    finally:
        proc.kill()
        proc.wait()
