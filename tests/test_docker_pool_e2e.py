"""sandbox.warm_pool through the real CLI against a real engine: the pool's containers are gone after a
finished run, after Ctrl-C, and after a kill -9 once the next invocation of the run has reaped them."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import done_rows, read_jsonl, run_cli, write_dataset
from test_docker_e2e import containers_of, docker_args, engine, reap, run_id  # noqa: F401 (fixtures)

from hermes_exp.mock.server import MockServer
from hermes_exp.sandbox.docker import RUN_LABEL, TASK_LABEL
from hermes_exp.sandbox.docker_pool import POOL_KEY

pytestmark = [pytest.mark.docker, pytest.mark.slow]
POOL = ("sandbox.warm_pool=3", "num_workers=2")


def pooled(engine: Any, rid: str) -> list[str]:
    label = [f"{RUN_LABEL}={rid}", f"{TASK_LABEL}={POOL_KEY}"]
    return [c["Id"] for c in engine.api.containers(all=True, filters={"label": label})]


def start_run(cwd: Path, args: list[str]) -> subprocess.Popen:
    with (cwd / "run.log").open("w") as err:
        return subprocess.Popen([sys.executable, "-m", "hermes_exp.cli", *args], cwd=cwd,
                                stdout=subprocess.DEVNULL, stderr=err)


def interrupt_with_pool_up(cwd: Path, engine: Any, rid: str, proc: subprocess.Popen, sig: int) -> None:
    """Send `sig` once a task is done and the pool holds containers made ahead (none in use yet)."""
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if done_rows(cwd / "outputs" / "pool" / "ledger.db") >= 1 and len(pooled(engine, rid)) >= 3:
                break
            time.sleep(0.05)
        assert proc.poll() is None, f"the run ended before the signal: {(cwd / 'run.log').read_text()}"
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def test_pool_gone_after_the_run_and_after_ctrl_c(tmp_path: Path, engine: Any, reap) -> None:  # noqa: F811
    rid = run_id(tmp_path, "pool")
    reap.append(rid)
    rows = [{"prompt": f"RUN: sleep 1; echo pooled {i} > f.txt; cat f.txt\nTask {i}"} for i in range(12)]
    data = write_dataset(tmp_path / "p.jsonl", rows)
    with MockServer(latency_ms=200) as server:
        args = docker_args(data, "pool", server.base_url, *POOL)
        proc = start_run(tmp_path, args)
        interrupt_with_pool_up(tmp_path, engine, rid, proc, signal.SIGINT)
        assert proc.returncode == 130, (tmp_path / "run.log").read_text()
        assert not containers_of(engine, rid), "containers (the pool's) outlived Ctrl-C"
        final = run_cli(tmp_path, *args, timeout=300)
    assert final.returncode == 0, final.stderr
    trajectories = read_jsonl(tmp_path / "outputs" / "pool" / "trajectories.jsonl")
    assert sorted(t["prompt_index"] for t in trajectories) == list(range(12))
    for t in trajectories:  # each task saw its own file only, in a fresh container
        tool_text = "".join(turn["value"] for turn in t["conversations"] if turn["from"] == "tool")
        assert f"pooled {t['prompt_index']}" in tool_text
    assert not containers_of(engine, rid), "containers (the pool's) outlived the run"


def test_pool_left_by_kill_9_is_reaped_by_the_next_run(tmp_path: Path, engine: Any, reap) -> None:  # noqa: F811
    rid = run_id(tmp_path, "pool")
    reap.append(rid)
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"RUN: sleep 1\nTask {i}"} for i in range(10)])
    with MockServer(latency_ms=200) as server:
        args = docker_args(data, "pool", server.base_url, *POOL)
        interrupt_with_pool_up(tmp_path, engine, rid, start_run(tmp_path, args), signal.SIGKILL)
        assert pooled(engine, rid), "no pooled container at the kill: the test proves nothing"
        final = run_cli(tmp_path, *args, timeout=300)
    assert final.returncode == 0, final.stderr
    assert done_rows(tmp_path / "outputs" / "pool" / "ledger.db") == 10
    assert not containers_of(engine, rid), "the killed run's pool was not reaped"
