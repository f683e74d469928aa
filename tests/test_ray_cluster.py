"""A real multi-node Ray cluster (tests/ray_nodes.py): `ray start --head` and worker nodes that cannot see
the run directory or the parent's /tmp. Every task runs, each in a bubblewrap sandbox opened on the node
that runs it; results reach the parent's ledger once; nodes killed mid-run (SIGKILL of their raylet) lose
no finished work (it is exported), their tasks in flight run again on resume; the budget holds."""

from __future__ import annotations

import json
import os
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
from test_budget_money import served_cost

from hermes_exp.mock.server import MockServer
from tests.sandbox.conftest import IMAGE, docker_problem, unavailable

pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'hermes-exp[ray]')")

# In the sandbox: the node's hostname (its UTS namespace) and the mount behind /task (the task
# directory, made by the node under its own /tmp: a tmpfs named after the node).
# Enough tasks that node-a, up first, cannot finish them all while node-b's actor starts on a loaded machine.
N = 16
PROBE = "RUN: cat /proc/sys/kernel/hostname; grep ' /task ' /proc/self/mountinfo; sleep 1"


def _cannot_run_here() -> str | None:
    for tool in ("bwrap", "unshare", "nsenter"):
        if not shutil.which(tool):
            return f"{tool} is not installed"
    probe = subprocess.run(["unshare", "--mount", "--uts", "--pid", "--fork", "true"], capture_output=True)
    return f"cannot make namespaces: {probe.stderr.decode()}" if probe.returncode else docker_problem()


def _cli(cluster: Cluster, base_url: str, data: Path, run_name: str, *extra: str) -> list[str]:
    return [f"dataset.path={data}", f"run_name={run_name}", "executor=ray", f"executor.address={cluster.address}",
            "num_workers=2", "sandbox=bwrap", "distribution=terminal_only", "filters=none", "max_turns=3",
            f"model.base_url={base_url}", *extra]


def _done(run_dir: Path) -> dict[str, tuple[float, str]]:
    """key -> (finished_at, result JSON) of the ledger's done tasks."""
    with sqlite3.connect(run_dir / "ledger.db") as db:
        rows = db.execute("SELECT key, finished_at, result FROM tasks WHERE state = 'done'").fetchall()
    return {key: (finished, result) for key, finished, result in rows}


def _ledger_spend(run_dir: Path) -> float:
    with sqlite3.connect(run_dir / "ledger.db") as db:
        return db.execute("SELECT TOTAL(spent_usd) FROM tasks").fetchone()[0]


def _nodes_done(run_dir: Path) -> set[str]:
    if not (run_dir / "ledger.db").exists():
        return set()
    try:
        return {_node_of(result) for _, result in _done(run_dir).values()}
    except sqlite3.Error:  # the run is creating its ledger
        return set()


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
        unavailable(reason)
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"Ray task {i}\n{PROBE}"} for i in range(N)])
    cluster = Cluster(hidden=[outputs])
    with MockServer(latency_ms=50, record_path=str(tmp_path / "requests.jsonl")) as server:
        try:
            _lose_nodes_then_resume(tmp_path, cluster, server.base_url, data)
            _budget_holds(tmp_path, cluster, server, data)
        finally:
            cluster.stop()


def _lose_nodes_then_resume(tmp_path: Path, cluster: Cluster, base_url: str, data: Path) -> None:
    run_dir = tmp_path / "outputs" / "r"
    # priced, with a budget it never reaches: its broker books every call, a lost node's too
    args = _cli(cluster, base_url, data, "r", *PRICED, "budget.max_cost_usd=1000")
    cluster.start_head()
    cluster.wait_started()
    refused = run_cli(tmp_path, *args, env=cluster.env, timeout=120)  # the head alone has no CPU for actors
    assert refused.returncode == 3 and "has no free CPU for this run's actors" in refused.stderr, refused.stderr
    assert "0 kept, 0 filtered, 0 failed, 16 pending" in refused.stderr, refused.stderr
    node_a, node_b = cluster.add_worker("node-a", "127.0.0.2"), cluster.add_worker("node-b", "127.0.0.3")
    cluster.wait_started()
    assert not node_a.sees(tmp_path / "outputs") and not node_a.sees(tmp_path / "p.jsonl")
    first = subprocess.Popen([sys.executable, "-m", "hermes_exp.cli", *args], cwd=tmp_path, text=True,
                             env={**os.environ, **cluster.env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # the actors spread: one on each node (the head has no CPU), each has finished a task
        _wait(lambda: _nodes_done(run_dir) == {"node-a", "node-b"}, 120, "a task done on each node", first)
        node_b.kill_raylet()  # node-b's task in flight stays pending; node-a goes on
        killed_at = done_rows(run_dir / "ledger.db")
        _wait(lambda: done_rows(run_dir / "ledger.db") > killed_at, 60, "one more task done", first)
        node_a.kill_raylet()  # no actor left: the run ends, its finished tasks saved
        _, stderr = first.communicate(timeout=60)
    finally:
        first.kill()
    assert first.returncode == 3, stderr
    assert "a Ray actor of this run died" in stderr and "every Ray actor of this run died" in stderr, stderr
    assert "Traceback" not in stderr, stderr
    before = _done(run_dir)
    assert 3 <= len(before) < N and _nodes_done(run_dir) == {"node-a", "node-b"}
    assert len(read_jsonl(run_dir / "trajectories.jsonl")) == len(before)  # exported all the same
    assert _ledger_spend(run_dir) >= served_cost(tmp_path / "requests.jsonl", "Ray task") > 0  # the lost calls are counted

    cluster.add_worker("node-c", "127.0.0.4")
    cluster.add_worker("node-d", "127.0.0.5")
    cluster.wait_started()
    resumed = run_cli(tmp_path, *args, env=cluster.env, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    after = _done(run_dir)
    assert len(after) == N  # each task's result reached the ledger once
    assert sorted(r["prompt_index"] for r in read_jsonl(run_dir / "trajectories.jsonl")) == list(range(N))
    assert all(after[key] == before[key] for key in before)  # finished work was not run again
    assert {_node_of(after[key][1]) for key in after.keys() - before.keys()} <= {"node-c", "node-d"}


def _budget_holds(tmp_path: Path, cluster: Cluster, server: MockServer, data: Path) -> None:
    """Two actors (one per live node) book their calls in the parent's budget broker: the run stops within
    the limit, and what the mock served costs at most the limit plus one call's worst case per session.
    The sandboxes are containers this time, started by the nodes (on the one engine they all share)."""
    rows = [{"prompt": f"Budget ray task {i}\n{PROBE}"} for i in range(12)]
    limit = 2.5  # the 12 tasks would cost ~$4.3; one call's worst case is ~$1.5
    budget_data = write_dataset(tmp_path / "b.jsonl", rows)
    args = _cli(cluster, server.base_url, budget_data, "b", *PRICED, f"budget.max_cost_usd={limit}",
                "sandbox=docker", f"sandbox.image={IMAGE}")
    result = run_cli(tmp_path, *args, env=cluster.env, timeout=120)
    assert result.returncode == 4, result.stderr
    assert "share" not in result.stderr and f"spent of budget.max_cost_usd={limit:g}" in result.stderr, result.stderr
    kept = read_jsonl(tmp_path / "outputs" / "b" / "trajectories.jsonl")
    tool_turns = [c["value"] for r in kept for c in r["conversations"] if c["from"] == "tool"]
    assert len(tool_turns) == len(kept) and all('"exit_code": 0' in turn for turn in tool_turns), tool_turns
    worst = float(re.search(r"could cost up to \$([0-9.]+)", result.stderr).group(1))
    cost = served_cost(tmp_path / "requests.jsonl", "Budget ray task")
    stats = json.loads((tmp_path / "outputs" / "b" / "statistics.json").read_text())
    assert 0 < stats["spent_usd"] <= limit
    assert cost <= limit + 2 * worst and cost == pytest.approx(stats["spent_usd"])
