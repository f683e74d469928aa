"""Limits and stop reasons through the real CLI: output cut at the token limit, a provider's context-length
refusal, limits.task_seconds and limits.task_tokens each end the sample settled with its stop reason,
and the same command again retries none of them."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import request_count, run_cli, write_dataset

from hermes_exp.mock.server import MockServer

CASES = [  # mock server settings, run overrides, the stop reason, api calls it makes (None: some)
    ({"faults": {"script": ["ok", "length"]}}, [], "context_overflow", 2),
    ({"faults": {"always": "context_length"}}, [], "context_overflow", 0),
    ({"latency_ms": 150}, ["limits.task_seconds=0.4"], "task_seconds", None),
    ({}, ["limits.task_tokens=1500"], "task_tokens", None),
]


@pytest.mark.parametrize("mock, overrides, reason, calls", CASES, ids=["length", "context_length", "seconds", "tokens"])
def test_each_stop_ends_the_sample_settled_and_is_not_retried(tmp_path: Path, mock: dict, overrides: list[str],
                                                                reason: str, calls: int | None) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "RUN: echo one\nLOOP"}])
    record = tmp_path / "requests.jsonl"
    with MockServer(record_path=str(record), **mock) as server:
        args = [f"dataset.path={data}", "run_name=lim", f"model.base_url={server.base_url}", "filters=none",
                "max_turns=30", *overrides]
        first = run_cli(tmp_path, *args)
        assert first.returncode == 0, first.stderr
        sent = request_count(record)
        again = run_cli(tmp_path, *args)
        assert again.returncode == 0, again.stderr
        assert request_count(record) == sent  # settled: never retried
    out = tmp_path / "outputs" / "lim"
    with sqlite3.connect(out / "ledger.db") as db:
        state, stop, api_calls, context, prompt, completion, result = db.execute(
            "SELECT state, stop_reason, api_calls, context_tokens, prompt_tokens, completion_tokens, result "
            "FROM tasks").fetchone()
    result = json.loads(result)
    assert (state, stop, result["partial"], result["completed"]) == ("done", reason, True, False)
    assert result["stop_detail"]
    assert api_calls == (calls if calls is not None else api_calls) and 0 < sent < 30
    usage = result["usage"]
    assert context == (usage[-1]["prompt_tokens"] + usage[-1]["completion_tokens"] if usage else 0)
    if reason == "task_tokens":
        assert prompt + completion >= 1500 > prompt + completion - usage[-1]["prompt_tokens"] - usage[-1]["completion_tokens"]
    stats = json.loads((out / "statistics.json").read_text())
    assert stats["stop_reasons"] == {reason: 1}
    assert stats["trajectory_tokens"] == {"p50": context, "p90": context, "max": context}
    [row] = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert row["partial"] is True and row["api_calls"] == api_calls


def test_trajectory_lengths_spread_over_kept_samples(tmp_path: Path, mock_server) -> None:
    prompts = [{"prompt": "RUN: echo a\n" * n + "Report."} for n in range(1, 6)]
    data = write_dataset(tmp_path / "p.jsonl", prompts)
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=spread", f"model.base_url={mock_server.base_url}")
    assert result.returncode == 0, result.stderr
    out = tmp_path / "outputs" / "spread"
    with sqlite3.connect(out / "ledger.db") as db:
        lengths = sorted(v for (v,) in db.execute("SELECT context_tokens FROM tasks WHERE state = 'done'"))
    stats = json.loads((out / "statistics.json").read_text())
    assert len(lengths) == 5 and len(set(lengths)) == 5
    assert stats["trajectory_tokens"] == {"p50": lengths[2], "p90": lengths[4], "max": lengths[4]}
    assert stats["stop_reasons"] == {"final_answer": 5}
