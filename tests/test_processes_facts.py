"""Facts that cross process boundaries: under executor=processes (and dask, ray) each worker process gets
its share of the budget from the number of processes the executor says it runs, and the progress line
shows the workers' own rate limiters (their 429s), not the parent's idle one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import read_jsonl, run_cli, write_dataset
from test_budget import PRICED

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


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["processes", "dask", "ray"])
def test_budget_share_comes_from_the_executors_process_count(tmp_path: Path, executor: str) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"Budget task {i}"} for i in range(16)])
    with MockServer(record_path=str(tmp_path / "r.jsonl")) as server:
        result = run_cli(tmp_path, f"model.base_url={server.base_url}", f"dataset.path={data}", "run_name=bx",
                         f"executor={executor}", "num_workers=2", "max_turns=4", "filters=none", *PRICED,
                         "budget.max_cost_usd=6.0", "distribution=terminal_only", timeout=300)
    assert result.returncode == 4, result.stderr
    shares = {int(n) for n in re.findall(r"this process's 1/(\d+) share", result.stderr)}
    assert shares == {2}, result.stderr  # 2 loky workers, 2 dask workers, 2 ray actors (2 CPUs, 2 sessions)
    stats = json.loads((tmp_path / "outputs" / "bx" / "statistics.json").read_text())
    assert 0 < stats["spent_usd"] <= 6.0
