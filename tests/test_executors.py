"""Every executor runs the same tasks to the same results; the parent alone writes the ledger."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import agent_request_count, read_jsonl, run_cli, write_dataset


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["threads", "processes", "dask", "ray"])
def test_executor_runs_every_task_once(executor: str, tmp_path: Path, mock_server) -> None:
    n = 24  # more than the ray executor's in-flight window, so refilling it is exercised
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"Executor task {i}"} for i in range(n)])
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=ex", f"executor={executor}", "num_workers=3",
                     f"model.base_url={mock_server.base_url}", "sandbox=local", timeout=300)
    assert result.returncode == 0, result.stderr
    rows = read_jsonl(tmp_path / "outputs" / "ex" / "trajectories.jsonl")
    assert sorted(r["prompt_index"] for r in rows) == list(range(n))
    assert agent_request_count(tmp_path / "requests.jsonl") == sum(r["api_calls"] for r in rows)
