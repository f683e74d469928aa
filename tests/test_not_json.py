"""A 200 answer whose body is not JSON (seen: `{this is not json` with application/json) is the provider's
fault: retried like a 5xx, then recorded as class `provider` with a one-line message, for the agent's calls
and for the judge's alike; never a traceback, never class `internal`."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from conftest import run_cli, write_dataset
from test_providers import FAST_RETRY, TOOLS, client_for

from hermes_exp.mock.server import MockServer

RETRY = [*FAST_RETRY, "model.retry.max_attempts=3"]


def _rows(ledger: Path, query: str) -> list[tuple]:
    with sqlite3.connect(ledger) as db:
        return db.execute(query).fetchall()


def test_an_answer_that_is_not_json_is_retried_then_a_provider_error(tmp_path: Path) -> None:
    with MockServer(faults={"script": ["not_json"]}) as server:
        reply = client_for(server, *RETRY).complete([{"role": "user", "content": "hi"}], TOOLS)
        assert reply.attempts == 2 and server.request_count == 2
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "RUN: echo one\nReport."}])
    with MockServer(faults={"always": "not_json"}) as server:
        result = run_cli(tmp_path, f"dataset.path={data}", "run_name=nj", f"model.base_url={server.base_url}",
                         "distribution=terminal_only", "resume.task_attempts=1", *RETRY)
        assert server.request_count == 3  # every attempt was made
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr and "some tasks failed (provider)" in result.stderr
    [(state, error_class, error)] = _rows(tmp_path / "outputs" / "nj" / "ledger.db",
                                          "SELECT state, error_class, error FROM tasks")
    assert (state, error_class) == ("error", "provider")
    assert "not JSON" in error and "'{this is not json'" in error and "gave up after 3 attempts" in error
    assert "\n" not in error


def test_a_judge_answer_that_is_not_json_fails_the_score_with_one_line(tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "j.jsonl", [{"prompt": "RUN: echo hello\nGreet", "rubric": "says hello"}])
    with MockServer(faults={"always": "not_json"}) as judge:
        result = run_cli(tmp_path, f"dataset.path={data}", "run_name=jn", "sandbox=local", "filters=none",
                         f"model.base_url={mock_server.base_url}", "verifier=judge", "resume.task_attempts=1", *RETRY,
                         f"verifier.model={{name: judge-x, base_url: '{judge.base_url}', retry: "
                         "{max_attempts: 2, backoff_seconds: 0.01}}")
        assert judge.request_count == 2
    assert "Traceback" not in result.stderr and "JSONDecodeError" not in result.stderr
    ledger = tmp_path / "outputs" / "jn" / "ledger.db"
    [(error,)] = _rows(ledger, "SELECT error FROM scores")
    assert "the judge's model call failed" in error and "not JSON" in error and "\n" not in error
    assert _rows(ledger, "SELECT error_class FROM tasks") != [("internal",)]
    stats = json.loads((tmp_path / "outputs" / "jn" / "statistics.json").read_text())
    assert stats["verification"]["verifier_errors"] == 1
