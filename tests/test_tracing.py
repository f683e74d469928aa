"""OpenTelemetry traces (`tracing.*`): a span per task, model call and tool call, the task's span the parent
of its calls' spans, with the GenAI semantic conventions' attributes; content only with tracing.content=true.
Seen by the SDK's own InMemorySpanExporter (an in-process run through the CLI's run function, its spans on
the program's tracer provider) and by a real OTLP/HTTP collector on 127.0.0.1 fed by the real CLI."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from conftest import done_rows, read_jsonl, run_cli
from otlp_collector import Collector, Received

CONTENT_KEYS = {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments",
                "gen_ai.tool.call.result"}


@pytest.fixture(scope="module")
def memory() -> InMemorySpanExporter:
    """The program's own tracer provider (what `tracing.global_provider=true` uses), kept in memory."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # the process has none yet: install one, as a program would
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


def _run_in_process(tmp_path: Path, *overrides: str) -> int:
    from hermes_exp.cli.listing import compose_settings
    from hermes_exp.run.invocation import run
    from hermes_exp.settings.paths import config_dir

    return run(compose_settings(config_dir(), [f"run_dir={tmp_path / 'run'}", "run_name=traced", *overrides]))


def _ledger(run_dir: Path) -> dict[int, dict[str, Any]]:
    """prompt index -> state, api_calls and tool calls as the ledger has them."""
    with sqlite3.connect(run_dir / "ledger.db") as conn:
        rows = conn.execute("SELECT prompt_index, state, result FROM tasks").fetchall()
    return {i: {"state": state, **{k: json.loads(result).get(k) for k in ("api_calls", "tool_calls", "usage")}}
            for i, state, result in rows}


def _by_kind(spans: list[Any], name: str = "gen_ai.operation.name") -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for span in spans:
        out.setdefault(span.attributes[name], []).append(span)
    return out


def test_a_demo_run_makes_a_span_per_task_model_call_and_tool_call(tmp_path: Path, memory: InMemorySpanExporter) -> None:
    memory.clear()
    assert _run_in_process(tmp_path, "tracing.global_provider=true") == 0
    ledger = _ledger(tmp_path / "run")
    ops = _by_kind(memory.get_finished_spans())
    assert set(ops) == {"invoke_agent", "chat", "execute_tool"}
    tasks = {s.attributes["hermes_exp.task.index"]: s for s in ops["invoke_agent"]}
    assert sorted(tasks) == sorted(ledger) and len(ops["invoke_agent"]) == len(ledger)  # one span per task
    for index, task in tasks.items():
        assert task.name == "invoke_agent traced" and task.parent is None and task.kind == SpanKind.INTERNAL
        assert task.attributes["gen_ai.agent.name"] == "traced" and task.attributes["gen_ai.request.model"] == "mock"
        assert task.attributes["hermes_exp.state"] == "finished" and task.status.status_code == StatusCode.UNSET
        children = [s for s in memory.get_finished_spans() if s.parent is not None and s.parent.span_id == task.context.span_id]
        assert all(c.context.trace_id == task.context.trace_id for c in children)
        calls = [c for c in children if c.attributes["gen_ai.operation.name"] == "chat"]
        tools = [c for c in children if c.attributes["gen_ai.operation.name"] == "execute_tool"]
        assert len(calls) == ledger[index]["api_calls"] == task.attributes["hermes_exp.api_calls"]
        assert [t.attributes["gen_ai.tool.name"] for t in sorted(tools, key=lambda s: s.start_time)] == \
            [c["name"] for c in ledger[index]["tool_calls"]]
        inputs = [u["prompt_tokens"] for u in ledger[index]["usage"]]
        assert sorted(c.attributes["gen_ai.usage.input_tokens"] for c in calls) == sorted(inputs)
        assert task.attributes["gen_ai.usage.input_tokens"] == sum(inputs)
        assert task.start_time <= min(c.start_time for c in children) and task.end_time >= max(c.end_time for c in children)
    for call in ops["chat"]:
        assert call.name == "chat mock" and call.kind == SpanKind.CLIENT
        assert call.attributes["gen_ai.provider.name"] == "local" and call.attributes["gen_ai.request.temperature"] == 0.0
        assert call.attributes["gen_ai.usage.output_tokens"] > 0 and call.attributes["gen_ai.response.finish_reasons"]
        assert call.attributes["hermes_exp.cost_usd"] == 0.0 and call.attributes["server.address"] == "127.0.0.1"
    for tool in ops["execute_tool"]:
        assert tool.name == f"execute_tool {tool.attributes['gen_ai.tool.name']}" and tool.attributes["gen_ai.tool.call.id"]
    assert not any(CONTENT_KEYS & set(s.attributes) for s in memory.get_finished_spans())  # no content by default


def test_content_goes_on_spans_only_when_asked(tmp_path: Path, memory: InMemorySpanExporter) -> None:
    memory.clear()
    assert _run_in_process(tmp_path, "tracing.global_provider=true", "tracing.content=true", "max_samples=2") == 0
    trajectories = {r["prompt_index"]: r for r in read_jsonl(tmp_path / "run" / "trajectories.jsonl")}
    ops = _by_kind(memory.get_finished_spans())
    first = min(ops["chat"], key=lambda s: s.start_time)
    sent = json.loads(first.attributes["gen_ai.input.messages"])
    index = next(t.attributes["hermes_exp.task.index"] for t in ops["invoke_agent"]
                 if t.context.span_id == first.parent.span_id)
    human = trajectories[index]["conversations"][1]["value"]
    assert [m["role"] for m in sent] == ["system", "user"] and sent[1]["parts"] == [{"type": "text", "content": human}]
    answer = json.loads(first.attributes["gen_ai.output.messages"])[0]
    assert answer["role"] == "assistant" and answer["finish_reason"]
    assert {p["type"] for p in answer["parts"]} <= {"reasoning", "text", "tool_call"}
    for tool in ops["execute_tool"]:
        json.loads(tool.attributes["gen_ai.tool.call.arguments"])  # the model's arguments, as written
        assert isinstance(tool.attributes["gen_ai.tool.call.result"], str)


def test_failed_calls_say_their_error_type(tmp_path: Path, memory: InMemorySpanExporter) -> None:
    memory.clear()
    code = _run_in_process(tmp_path, "tracing.global_provider=true", "max_samples=2", "num_workers=1",
                           "model.mock_server.bad_tool_rate=1.0", "model.mock_server.faults.script=[ok,ok,400]")
    assert code == 3  # the task whose call got the 400 failed
    spans = memory.get_finished_spans()
    ops = _by_kind(spans)
    failed = [s for s in ops["chat"] if s.status.status_code == StatusCode.ERROR]
    assert len(failed) == 1 and failed[0].attributes["error.type"] == "ProviderError"
    assert failed[0].attributes["hermes_exp.error_class"] == "provider" and "400" in failed[0].status.description
    task = next(s for s in ops["invoke_agent"] if s.context.span_id == failed[0].parent.span_id)
    assert task.attributes["error.type"] == "provider" and task.attributes["hermes_exp.state"] == "error"
    assert task.status.status_code == StatusCode.ERROR
    invalid = [s for s in ops["execute_tool"] if s.attributes.get("error.type") == "invalid_tool_call"]
    assert invalid and all(s.status.status_code == StatusCode.ERROR for s in invalid)


def _collected(collector: Collector, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, list[Received]]:
    done = run_cli(tmp_path, f"tracing.otlp_endpoint={collector.endpoint}", *args)
    return done, list(collector.spans)


def _check_tree(spans: list[Received], tasks: int) -> dict[str, list[Received]]:
    ops = _by_kind(spans)
    roots = {s.span_id: s for s in ops["invoke_agent"]}
    assert len(roots) == tasks and all(s.parent_id == "" for s in roots.values())
    for child in ops["chat"] + ops["execute_tool"]:
        assert child.parent_id in roots and child.trace_id == roots[child.parent_id].trace_id
    assert set(Counter(c.parent_id for c in ops["chat"])) == set(roots)  # every task called the model
    return ops


def test_the_cli_exports_spans_to_an_otlp_collector(tmp_path: Path) -> None:
    with Collector() as collector:
        done, spans = _collected(collector, tmp_path, "run_name=otlp")
        assert done.returncode == 0, done.stderr
        trajectories = read_jsonl(tmp_path / "outputs" / "otlp" / "trajectories.jsonl")
        ops = _check_tree(spans, len(trajectories))
        assert set(collector.paths) == {"/v1/traces"}
        assert {s.resource["service.name"] for s in spans} == {"hermes-exp"}
        for row in trajectories:
            task = next(s for s in ops["invoke_agent"] if s.attributes["hermes_exp.task.index"] == row["prompt_index"])
            calls = [s for s in ops["chat"] if s.parent_id == task.span_id]
            tools = [s for s in ops["execute_tool"] if s.parent_id == task.span_id]
            assert len(calls) == row["api_calls"] == task.attributes["hermes_exp.api_calls"]
            assert len(tools) == sum(stat["count"] for stat in row["tool_stats"].values())
            assert Counter(s.attributes["gen_ai.tool.name"] for s in tools) == \
                {k: v["count"] for k, v in row["tool_stats"].items() if v["count"]}
        assert all(s.kind == 3 and s.attributes["gen_ai.request.model"] == "mock" for s in ops["chat"])  # CLIENT
        assert not any(CONTENT_KEYS & set(s.attributes) for s in spans)
        assert sum(s.attributes["gen_ai.usage.input_tokens"] for s in ops["chat"]) > 0
        again, _ = _collected(collector, tmp_path, "run_name=otlp")  # tracing is not part of the identity
        assert again.returncode == 0 and "nothing to run" in again.stderr, again.stderr


@pytest.mark.slow
def test_worker_processes_export_their_own_spans(tmp_path: Path) -> None:
    with Collector() as collector:
        done, spans = _collected(collector, tmp_path, "run_name=procs", "executor=processes", "num_workers=2", "max_samples=4",
                                 "tracing.content=true")
        assert done.returncode == 0, done.stderr
        trajectories = read_jsonl(tmp_path / "outputs" / "procs" / "trajectories.jsonl")
        ops = _check_tree(spans, len(trajectories))
        assert all("gen_ai.input.messages" in s.attributes for s in ops["chat"])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("args, said", [
    (["tracing.otlp_endpoint=localhost:4318"], "tracing.otlp_endpoint='localhost:4318' is not an http(s) URL"),
    (["tracing.otlp_endpoint=http://127.0.0.1:{port}"], "cannot reach the OTLP collector"),
    (["tracing.otlp_endpoint=http://127.0.0.1:4318", "tracing.global_provider=true"], "both say where spans go"),
    (["tracing.content=maybe", "tracing.global_provider=true"], "tracing.content='maybe' must be true, false or null"),
])
def test_bad_tracing_settings_are_refused_before_any_task(tmp_path: Path, args: list[str], said: str) -> None:
    done = run_cli(tmp_path, "run_name=bad", *[a.format(port=_free_port()) for a in args])
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr
    assert done_rows(tmp_path / "outputs" / "bad" / "ledger.db") == 0  # no task ran


def test_tracing_without_the_extra_says_what_to_install(tmp_path: Path) -> None:
    """A Python where `opentelemetry` cannot be imported (a package in front of site-packages that fails
    to import, as a missing one does)."""
    shadow = tmp_path / "shadow" / "opentelemetry"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('opentelemetry is not installed here')\n")
    path = os.pathsep.join(p for p in (str(shadow.parent), os.environ.get("PYTHONPATH")) if p)
    done = run_cli(tmp_path, "run_name=noextra", "tracing.otlp_endpoint=http://127.0.0.1:4318", env={"PYTHONPATH": path})
    assert done.returncode == 2, done.stderr
    assert "the OpenTelemetry SDK is not installed" in done.stderr and "pip install 'hermes-exp[tracing]'" in done.stderr


NO_IMPORT = """
import json, sys
from hermes_exp.cli.listing import compose_settings
from hermes_exp.run.invocation import run
from hermes_exp.settings.paths import config_dir
code = run(compose_settings(config_dir(), sys.argv[1:]))
print(json.dumps({"code": code, "otel": sorted(m for m in sys.modules if m.startswith("opentelemetry"))}))
"""


def test_a_run_that_does_not_trace_imports_no_opentelemetry(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", NO_IMPORT, f"run_dir={tmp_path / 'run'}", "max_samples=2"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"code": 0, "otel": []}
