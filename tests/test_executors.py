"""Every executor runs the same tasks to the same results; the parent alone writes the ledger."""

from __future__ import annotations

import sqlite3
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
    # num_workers sessions at once, on every executor (dask's backend ran one per cluster thread, 16)
    assert _most_at_once(tmp_path / "outputs" / "ex" / "ledger.db") <= 3


def _most_at_once(db: Path) -> int:
    """The most sessions that ran at the same moment, from the times the workers reported."""
    with sqlite3.connect(db) as conn:
        spans = conn.execute("SELECT started_at, finished_at FROM tasks WHERE state = 'done'").fetchall()
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = most = 0
    for _, step in edges:  # an end sorts before a start at the same instant
        running += step
        most = max(most, running)
    return most


@pytest.mark.parametrize("target, values, says", [
    ("JoblibExecutor", {"n_jobs": "many"}, "executor.n_jobs='many' must be a positive integer"),
    ("JoblibExecutor", {"n_jobs": 0}, "executor.n_jobs=0 must be a positive integer"),
    ("JoblibExecutor", {"backend": "fork"}, "executor.backend='fork' is not valid; valid values: threading, loky"),
    ("DaskExecutor", {"n_workers": 0}, "executor.n_workers=0 must be a positive integer"),
    ("DaskExecutor", {"threads_per_worker": "8x"}, "executor.threads_per_worker='8x' must be a positive integer"),
    ("DaskExecutor", {"address": ""}, "executor.address='' must be a cluster address or null"),
    ("RayExecutor", {"num_cpus": -1}, "executor.num_cpus=-1 must be a positive integer"),
    ("RayExecutor", {"broker_host": "10.0.0.1:9000"}, "executor.broker_host='10.0.0.1:9000' must be a host name"),
    ("DaskExecutor", {"broker_host": ""}, "executor.broker_host='' must be a host name or IPv4 address"),
])
def test_a_bad_executor_value_names_its_key(target: str, values: dict, says: str) -> None:
    """Refused by the constructor (which the CLI's instantiation turns into exit 2 with the fix), not
    joblib's "n_jobs == 0 in Parallel has no meaning" or int()'s traceback halfway into a run."""
    import hermes_exp.executor.backends as executors
    from hermes_exp.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        getattr(executors, target)(**values)
    assert says in str(err.value) and "executor." in err.value.hint
    executors.RayExecutor(num_cpus=None, n_jobs=2)  # null: the machine's CPUs
