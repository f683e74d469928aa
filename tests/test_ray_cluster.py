"""A real multi-node Ray cluster (tests/ray_nodes.py): `ray start --head` and worker nodes that cannot see
the run directory or the parent's /tmp. Every task runs, each in a bubblewrap sandbox opened on the node
that runs it; results reach the parent's ledger once; nodes killed mid-run (SIGKILL of their raylet) lose
no finished work, their tasks run again (on another node, or on resume); the budget holds."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import done_rows, read_jsonl, run_cli, write_dataset
from ray_nodes import Cluster
from test_budget import PRICED

from hermes_exp.mock.server import MockServer

pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'hermes-exp[ray]')")

# In the sandbox: the node's hostname (its UTS namespace) and the mount behind /task (the task
# directory, made by the node under its own /tmp: a tmpfs named after the node).
PROBE = "RUN: cat /proc/sys/kernel/hostname; grep ' /task ' /proc/self/mountinfo; sleep 1"


def _cannot_run_here() -> str | None:
    for tool in ("bwrap", "unshare", "nsenter"):
        if not shutil.which(tool):
            return f"{tool} is not installed"
    probe = subprocess.run(["unshare", "--mount", "--uts", "--pid", "--fork", "true"], capture_output=True)
    return f"cannot make namespaces: {probe.stderr.decode()}" if probe.returncode else None


def _cli(tmp_path: Path, cluster: Cluster, base_url: str, data: Path, run_name: str, *extra: str) -> list[str]:
    return [f"dataset.path={data}", f"run_name={run_name}", "executor=ray", f"executor.address={cluster.address}",
            "num_workers=2", "sandbox=bwrap", "distribution=terminal_only", "filters=none", "max_turns=3",
            f"model.base_url={base_url}", *extra]


def _done(run_dir: Path) -> dict[str, tuple[float, str]]:
    """key -> (finished_at, result JSON) of the ledger's done tasks."""
    with sqlite3.connect(run_dir / "ledger.db") as db:
        rows = db.execute("SELECT key, finished_at, result FROM tasks WHERE state = 'done'").fetchall()
    return {key: (finished, result) for key, finished, result in rows}


def _node_of(result: str) -> str:
    """The node a task's sandbox ran on, from its tool output: the hostname, and the node's own tmpfs
    behind /task (never the parent's /tmp)."""
    names = set(re.findall(r"node-[a-z]", result))
    assert len(names) == 1, result[-2000:]
    node = names.pop()
    assert re.search(r" /task [^\\]*- tmpfs hx-tmp-" + node, result), result[-2000:]
    return node


def _wait(predicate, timeout: float, what: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, f"the run ended before {what}: {proc.communicate()[1][-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.slow
def test_tasks_run_on_nodes_that_cannot_see_the_run_directory(tmp_path: Path) -> None:
    reason = _cannot_run_here()
    if reason:
        pytest.skip(reason)
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"Ray task {i}\n{PROBE}"} for i in range(10)])
    cluster = Cluster(hidden=[outputs])
    with MockServer(latency_ms=50, record_path=str(tmp_path / "requests.jsonl")) as server:
        try:
            _lose_nodes_then_resume(tmp_path, cluster, server.base_url, data)
            _budget_holds(tmp_path, cluster, server, data)
        finally:
            cluster.stop()


def _lose_nodes_then_resume(tmp_path: Path, cluster: Cluster, base_url: str, data: Path) -> None:
    run_dir = tmp_path / "outputs" / "r"
    cluster.start_head()
    node_a, node_b = cluster.add_worker("node-a", "127.0.0.2"), cluster.add_worker("node-b", "127.0.0.3")
    cluster.wait_started()
    assert not node_a.sees(tmp_path / "outputs") and not node_a.sees(tmp_path / "p.jsonl")
    args = _cli(tmp_path, cluster, base_url, data, "r")
    first = subprocess.Popen([sys.executable, "-m", "hermes_exp.cli", *args], cwd=tmp_path, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait(lambda: done_rows(run_dir / "ledger.db") >= 2, 90, "two tasks done", first)
        node_b.kill_raylet()  # node-b's task in flight runs again on node-a
        _wait(lambda: done_rows(run_dir / "ledger.db") >= 5, 60, "five tasks done", first)
        node_a.kill_raylet()  # no actor left: the run ends, its finished tasks saved
        _, stderr = first.communicate(timeout=60)
    finally:
        first.kill()
    assert first.returncode == 3, stderr
    assert "a Ray actor of this run died" in stderr and "every Ray actor of this run died" in stderr, stderr
    assert "Traceback" not in stderr, stderr
    before = _done(run_dir)
    assert 5 <= len(before) < 10
    assert {_node_of(result) for _, result in before.values()} <= {"node-a", "node-b"}

    cluster.add_worker("node-c", "127.0.0.4")
    cluster.add_worker("node-d", "127.0.0.5")
    cluster.wait_started()
    resumed = run_cli(tmp_path, *args, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    after = _done(run_dir)
    assert len(after) == 10 and len(read_jsonl(run_dir / "trajectories.jsonl")) == 10
    assert all(after[key] == before[key] for key in before)  # finished work was not run again
    assert {_node_of(after[key][1]) for key in after.keys() - before.keys()} <= {"node-c", "node-d"}


def _budget_holds(tmp_path: Path, cluster: Cluster, server: MockServer, data: Path) -> None:
    """Two actors (one per live node), each with its share: together they stop within the limit; what the
    mock served costs at most the limit plus one call's worst case per session."""
    rows = [{"prompt": f"Budget ray task {i}\n{PROBE}"} for i in range(12)]
    budget_data = write_dataset(tmp_path / "b.jsonl", rows)
    result = run_cli(tmp_path, *_cli(tmp_path, cluster, server.base_url, budget_data, "b", *PRICED,
                                     "budget.max_cost_usd=6.0"), timeout=120)
    assert result.returncode == 4, result.stderr
    assert "this process's 1/2 share" in result.stderr, result.stderr
    worst = float(re.search(r"could cost up to \$([0-9.]+)", result.stderr).group(1))
    served = [r for r in read_jsonl(tmp_path / "requests.jsonl") if r["status"] == 200 and "Budget ray task"
              in json.dumps(r["body"])]
    cost = sum((r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"]) * 1000 / 1e6 for r in served)
    stats = json.loads((tmp_path / "outputs" / "b" / "statistics.json").read_text())
    assert 0 < stats["spent_usd"] <= 6.0
    assert cost <= 6.0 + 2 * worst and cost == pytest.approx(stats["spent_usd"])
