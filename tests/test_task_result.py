"""The worker hands every task back as one typed TaskResult, whatever happened (finished, failed,
cancelled), and the time of each phase (sandbox start, fixtures, agent, verifier, sandbox close) reaches
the ledger of a real run."""

from __future__ import annotations

import json
import pickle
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, write_dataset
from test_providers import settings_for

from hermes_exp.dataset.tasks import Task
from hermes_exp.worker import task as worker
from hermes_exp.worker.result import PHASES, TaskResult

ROWS = [
    {"prompt": "WRITE: answer.txt 42\nWrite the product of 6 and 7 to answer.txt.", "setup": "echo ready > ready.txt",
     "verifier": "command", "verify": "grep -qx 42 answer.txt"},  # verified in its sandbox
    {"prompt": "RUN: echo $((17 + 25))\nANSWER: 17 + 25 = 42\nWhat is 17 + 25?", "verifier": "answer",
     "expected": "42", "match": "numeric"},  # verified outside, after the sandbox closed
    {"prompt": "RUN: echo hi\nSay hi from the shell."},  # not verified
]


def _bwrap_usable() -> bool:
    return bool(shutil.which("bwrap")) and subprocess.run(["bwrap", "--dev-bind", "/", "/", "true"]).returncode == 0


@pytest.mark.parametrize("sandbox", ["local", pytest.param("bwrap", marks=pytest.mark.bwrap)])
def test_a_run_keeps_the_time_of_each_phase_of_every_task_in_its_ledger(tmp_path: Path, sandbox: str) -> None:
    if sandbox == "bwrap" and not _bwrap_usable():
        pytest.skip("bubblewrap is not usable here")
    data = write_dataset(tmp_path / "p.jsonl", ROWS)
    done = run_cli(tmp_path, f"dataset.path={data}", "run_name=timed", f"sandbox={sandbox}",
                   "distribution=terminal_only")
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(tmp_path / "outputs" / "timed" / "ledger.db") as db:
        rows = db.execute("SELECT prompt_index, state, started_at, finished_at, result FROM tasks "
                          "ORDER BY prompt_index").fetchall()
    assert [(i, s) for i, s, *_ in rows] == [(0, "done"), (1, "done"), (2, "done")]
    for index, _, started, finished, text in rows:
        timings = json.loads(text)["timings"]
        verified = "verifier" in ROWS[index]
        assert list(timings) == [p for p in PHASES if verified or p != "verifier"], index
        assert all(seconds >= 0 for seconds in timings.values()), timings
        # phases are measured inside the task's own span (a monotonic clock, rounded to microseconds)
        assert sum(timings.values()) <= finished - started + 1e-5, (timings, finished - started)
    assert timings["agent"] > 0


@pytest.fixture
def settings(tmp_path: Path, mock_server: Any) -> dict[str, Any]:
    """A worker's settings as the parent hands them over (the model server's address, the run's id)."""
    plain = settings_for(f"run_dir={tmp_path / 'out'}", "sandbox=local", "distribution=terminal_only",
                         "resume.task_attempts=1")
    run_id = f"hx-result-{tmp_path.name[-12:]}"
    yield {**plain, "invocation": {"base_url": mock_server.base_url, "run_id": run_id, "spent_usd": 0.0, "id": 1}}
    worker.release(run_id)


def _run(settings: dict[str, Any], row: dict[str, Any]) -> TaskResult:
    result = worker.run_task(settings, Task(key="k" + str(len(row)), index=0, row=row))
    assert isinstance(result, TaskResult)
    assert pickle.loads(pickle.dumps(result)) == result  # what the processes, Dask and Ray executors need
    return result


def test_a_finished_task_is_a_task_result_with_its_conversation_and_phases(settings: dict[str, Any]) -> None:
    result = _run(settings, {"prompt": "RUN: echo hi\nSay hi."})
    assert (result.state, result.completed, result.task_attempts) == ("finished", True, 1)
    assert "terminal" in result.tools_offered and result.api_calls == len(result.usage) >= 2
    assert list(result.timings) == ["sandbox", "fixtures", "agent", "close"]
    stored = result.stored()
    assert stored["timings"] == result.timings and "limiter" not in stored and "tools" not in stored


def test_a_task_whose_sandbox_fails_is_a_task_result_of_class_sandbox(settings: dict[str, Any]) -> None:
    result = _run(settings, {"prompt": "Say hi.", "setup": "echo broken >&2; exit 3"})
    assert (result.state, result.error_class, result.transient) == ("error", "sandbox", True)
    assert "exited 3: broken" in result.error
    assert result.messages is None and "agent" not in result.timings  # the agent never started
    assert {"sandbox", "fixtures", "close"} <= set(result.timings)
    assert "messages" not in result.to_dict()


def test_a_cancelled_task_is_a_task_result_without_work(settings: dict[str, Any]) -> None:
    worker.CANCEL.set()
    try:
        result = _run(settings, {"prompt": "Say hi."})
    finally:
        worker.CANCEL.clear()
    assert (result.state, result.spent_usd, result.timings) == ("cancelled", 0.0, {})
    assert set(result.to_dict()) == {"key", "index", "sample", "row", "started_at", "state", "spent_usd",
                                     "finished_at", "task_attempts"}
