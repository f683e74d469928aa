"""The docker warm pool (`sandbox.warm_pool`) against a real engine: containers started ahead are what
tasks get, each task still alone in a fresh container, and none is left after shutdown; plus the pool's
filling, pacing and stopping with plain callables, and a container without the engine's network stack."""

from __future__ import annotations

import itertools
import shutil
import threading
import time
import uuid
from collections.abc import Callable

import pytest

from hermes_exp.errors import ConfigError, SandboxError, ToolError
from hermes_exp.sandbox.docker import RUN_LABEL, TASK_LABEL, DockerSandboxFactory
from hermes_exp.sandbox.docker_pool import POOL_KEY, WarmPool
from hermes_exp.sandbox.reaper import registry_dir
from tests.sandbox.conftest import IMAGE2


def wait_for(check: Callable[[], object], what: str, timeout: float = 60) -> object:
    """Poll until `check()` is truthy (a deadline for a loaded machine, not a speed assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def run_containers(docker_client, run_id: str, task: str | None = None) -> set[str]:
    label = [f"{RUN_LABEL}={run_id}"] + ([f"{TASK_LABEL}={task}"] if task else [])
    return {c["Id"] for c in docker_client.api.containers(all=True, filters={"label": label})}


@pytest.mark.docker
def test_tasks_get_pooled_containers_each_alone_and_none_is_left(make_factory, docker_client) -> None:
    factory = make_factory(warm_pool=2)
    first = factory.open("v1:first", {})  # starts the pool
    first.close()
    wait_for(lambda: factory.pool.ready() == 2, "two pooled containers")
    ahead = run_containers(docker_client, factory.run_id, POOL_KEY)
    assert len(ahead) == 2
    a, b = factory.open("v1:a", {}), factory.open("v1:b", {})
    assert {a.container_id, b.container_id} <= ahead, "the tasks did not get the containers made ahead"
    assert a.exec("pwd", timeout=10).output.strip() == "/task"
    a.write_file("secret.txt", b"only-a")
    with pytest.raises(ToolError):
        b.read_file("secret.txt")
    assert "only-a" not in b.exec("cat /task/secret.txt; ls -a /task", timeout=10).output
    other = factory.open("v1:other-image", {"image": IMAGE2})  # not the default image: never from the pool
    assert other.container_id not in ahead
    for sb in (a, b, other):
        sb.close()
    wait_for(lambda: not run_containers(docker_client, factory.run_id) & {a.container_id, b.container_id},
             "the used containers' removal (in the background)")
    wait_for(lambda: factory.pool.ready() == 2, "the pool to refill")
    refilled = run_containers(docker_client, factory.run_id, POOL_KEY)
    assert len(refilled) == 2 and not refilled & ahead  # a used container never goes back
    factory.shutdown()
    assert not run_containers(docker_client, factory.run_id), "containers outlived shutdown"


@pytest.mark.docker
def test_executor_workers_start_no_container_once_the_runner_shut_down(make_factory, docker_client) -> None:
    """executor=processes: each worker has its own factory and pool. The runner's shutdown marks the run
    stopped before its reap, so a start a worker has in flight then, or makes later, is removed."""
    run_id = f"test-{uuid.uuid4().hex[:10]}"
    registry_dir(run_id).mkdir(parents=True)  # the runner's watchdog directory, as a run has it
    try:
        worker, plain = make_factory(run_id=run_id, warm_pool=1), make_factory(run_id=run_id)
        worker.open("v1:first", {}).close()  # starts the worker's pool
        wait_for(lambda: worker.pool.ready() == 1, "the worker's pool to fill")
        make_factory(run_id=run_id).shutdown()  # the runner's
        with pytest.raises(SandboxError, match="shutting down"):
            plain.open("v1:late", {})
        assert worker.pool.take()  # reaped by the runner already; the filler's refill is refused
        wait_for(lambda: worker.pool._stopped, "the worker's pool to stop")
        assert not run_containers(docker_client, run_id), "a worker's container outlived the runner's shutdown"
    finally:
        shutil.rmtree(registry_dir(run_id), ignore_errors=True)


@pytest.mark.docker
def test_without_network_the_container_has_no_engine_network_but_localhost(make_factory, docker_client) -> None:
    for read_only, quick in ((False, True), (True, False)):  # a read-only root keeps the engine's hosts file
        sb = make_factory(read_only=read_only).open("v1:net", {})
        try:
            assert bool(docker_client.api.inspect_container(sb.container_id)["Config"].get("NetworkDisabled")) is quick
            assert sb.exec("ls /sys/class/net", timeout=20).output.split() == ["lo"]
            assert "PING localhost (127.0.0.1)" in sb.exec("ping -c 1 -W 2 localhost", timeout=20).output
        finally:
            sb.close()


def test_warm_pool_must_be_a_whole_number() -> None:
    for bad in (-1, 1.5, "4", True):
        with pytest.raises(ConfigError) as err:
            DockerSandboxFactory(warm_pool=bad)
        assert "sandbox.warm_pool" in str(err.value)


def test_pool_fills_paced_hands_each_container_out_once_and_removes_the_rest() -> None:
    counter, removed, paced = itertools.count(), [], []
    pool = WarmPool(3, make=lambda: f"c{next(counter)}", remove=removed.append, pace=lambda: paced.append(1))
    assert pool.take() is None  # not started: the caller starts its own
    pool.start()
    wait_for(lambda: pool.ready() == 3, "the pool to fill")
    taken = [pool.take(), pool.take()]
    wait_for(lambda: pool.ready() == 3, "the pool to refill")
    assert taken == ["c0", "c1"] and pool.made == 5 and len(paced) >= 5  # every start went through the pace
    pool.stop()
    assert sorted(removed) == ["c2", "c3", "c4"] and pool.take() is None
    pool.start()  # a stopped pool stays stopped
    assert pool.ready() == 0


def test_a_container_made_while_stopping_is_removed() -> None:
    entered, release, removed = threading.Event(), threading.Event(), []

    def slow_make() -> str:
        entered.set()
        release.wait(10)
        return "late"

    pool = WarmPool(1, make=slow_make, remove=removed.append)
    pool.start()
    assert entered.wait(10)
    stopper = threading.Thread(target=pool.stop)
    stopper.start()
    wait_for(lambda: pool.take() is None and pool._stopped, "the stop to begin")
    release.set()
    stopper.join(10)
    assert removed == ["late"] and pool.ready() == 0
