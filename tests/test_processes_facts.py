"""Facts that cross process boundaries: under executor=processes the progress line shows the workers' own
rate limiters (their 429s), not the parent's idle one. (The budget is one for every process: the parent's
broker, tests/test_budget_broker.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import read_jsonl, run_cli, write_dataset

from hermes_exp.mock.server import MockServer


def progress_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if re.search(r"\] \d+/\d+ ", line)]


@pytest.mark.slow
def test_progress_shows_the_worker_processes_limiters(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"throttled {i}"} for i in range(6)])
    faults = {"script": ["429"] * 4, "retry_after_ms": 20}  # the first four requests, whichever worker sends them
    with MockServer(latency_ms=40, record_path=str(tmp_path / "r.jsonl"), faults=faults) as server:
        result = run_cli(tmp_path, f"model.base_url={server.base_url}", f"dataset.path={data}", "run_name=pf",
                         "executor=processes", "num_workers=2", "filters=none", "max_turns=3",
                         "model.retry.backoff_seconds=0.01", "model.retry.max_backoff_seconds=0.05",
                         "model.retry.max_attempts=20", "model.rate_limit.cooldown_seconds=0.05", timeout=240)
    assert result.returncode == 0, result.stderr
    served_429s = sum(r["status"] == 429 for r in read_jsonl(tmp_path / "r.jsonl"))
    assert served_429s == 4
    last = progress_lines(result.stderr)[-1]
    # two processes, one session each: their limiters' concurrency adds up; every 429 a worker saw is shown
    assert "6/6" in last and "concurrency 2" in last, last
    assert f"429s {served_429s} in last 60s" in last, (last, served_429s)
