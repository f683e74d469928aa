"""Docker backend end to end, against a real engine: images per row, a missing image, labels and
limits, the reaper (this run's leftovers only), the live-container cap, and an unreachable engine."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
import uuid

import pytest

from hermes_exp.errors import ConfigError, SandboxError
from hermes_exp.sandbox.docker import OWNER_LABEL, RUN_LABEL, TASK_LABEL, DockerSandboxFactory
from tests.sandbox.conftest import IMAGE, IMAGE2, need_runtime

pytestmark = pytest.mark.docker


def test_row_image_wins_over_default(make_factory) -> None:
    factory = make_factory()
    for row, marker in (({}, False), ({"image": IMAGE2}, True), ({"docker_image": IMAGE2}, True)):
        sb = factory.open("v1:img", row)
        try:
            assert ("hermes-exp-test" in sb.exec("cat /IMAGE2", timeout=10).output) is marker
        finally:
            sb.close()


def test_missing_image_fails_only_its_task(make_factory) -> None:
    factory = make_factory()
    missing = f"hermes-exp-test/missing-{uuid.uuid4().hex[:8]}:latest"
    factory.preflight({missing, IMAGE2})  # logs the missing image, does not raise
    for _ in range(2):  # the answer is cached: the second task fails the same way, at once
        with pytest.raises(SandboxError) as err:
            factory.open("v1:missing", {"image": missing})
        assert missing in str(err.value)
    sb = factory.open("v1:fine", {})
    sb.close()


def test_labels_and_limits(make_factory, docker_client) -> None:
    factory = make_factory(memory_mb=96, cpus=0.5, pids_limit=32, read_only=True)
    sb = factory.open("v1:labels", {"cwd": "/work/repo"})
    try:
        info = docker_client.api.inspect_container(sb.container_id)
        labels, host = info["Config"]["Labels"], info["HostConfig"]
        assert labels[RUN_LABEL] == factory.run_id and labels[TASK_LABEL] == "v1:labels"
        assert OWNER_LABEL in labels
        assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] is True
        assert host["Memory"] == 96 * 2**20 and host["NanoCpus"] == 5 * 10**8 and host["PidsLimit"] == 32
        assert sb.exec("pwd", timeout=10).output.strip() == "/work/repo"
        sb.write_file("x.txt", b"in the volume")
        assert sb.exec("cat /work/repo/x.txt", timeout=10).output == "in the volume"
    finally:
        sb.close()


def test_network_true_and_writable_root(make_factory, docker_client) -> None:
    sb = make_factory(network=True, read_only=False).open("v1:net", {})
    try:
        assert docker_client.api.inspect_container(sb.container_id)["HostConfig"]["NetworkMode"] == "bridge"
        assert sb.exec("touch /etc/ok && echo wrote", timeout=10).output.strip() == "wrote"
    finally:
        sb.close()


def test_reaper_removes_only_this_runs_leftovers(make_factory, docker_client) -> None:
    factory = make_factory()
    other_run = f"test-other-{uuid.uuid4().hex[:8]}"
    keep = ["sh", "-c", "while :; do sleep 3600; done"]
    leftover = docker_client.containers.run(IMAGE, keep, detach=True, network_mode="none",
                                            labels={RUN_LABEL: factory.run_id})  # no owner: crashed runner
    dead = docker_client.containers.run(IMAGE, keep, detach=True, network_mode="none", labels={
        RUN_LABEL: factory.run_id, OWNER_LABEL: f"{socket.gethostname()}:{_dead_pid()}"})
    foreign = docker_client.containers.run(IMAGE, keep, detach=True, network_mode="none",
                                           labels={RUN_LABEL: other_run, OWNER_LABEL: "elsewhere:1"})
    try:
        factory.preflight(set())
        live = factory.open("v1:live", {})  # made by this (live) process: preflight must not touch it
        factory.preflight(set())
        ids = {c["Id"] for c in docker_client.api.containers(all=True)}  # no per-container inspect racing removals
        assert leftover.id not in ids and dead.id not in ids and foreign.id in ids and live.container_id in ids
        factory.shutdown()  # removes all of this run's containers, still none of the other run's
        factory.shutdown()
        ids = {c["Id"] for c in docker_client.api.containers(all=True)}  # no per-container inspect racing removals
        assert live.container_id not in ids and foreign.id in ids
        live.close()  # closing after shutdown is harmless
    finally:
        foreign.remove(force=True)
        for c in (leftover, dead):
            try:
                c.remove(force=True)
            except Exception:
                pass


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_max_sandboxes_caps_live_containers(make_factory) -> None:
    factory = make_factory(max_sandboxes=1)
    first = factory.open("v1:first", {})
    second: list = []
    waiter = threading.Thread(target=lambda: second.append(factory.open("v1:second", {})))
    waiter.start()
    time.sleep(0.7)
    assert not second, "a second container opened while the cap was reached"
    first.close()
    waiter.join(10)
    assert second
    second[0].close()


def test_unreachable_engine_is_one_clear_error() -> None:
    factory = DockerSandboxFactory(base_url="unix:///nonexistent/docker.sock", run_id="test-down")
    with pytest.raises(SandboxError) as err:
        factory.preflight({IMAGE})
    text = str(err.value)
    assert "unix:///nonexistent/docker.sock" in text and "DOCKER_HOST" in text and "sandbox=bwrap" in text
    with pytest.raises(SandboxError):
        factory.open("v1:x", {})
    factory.shutdown()  # only logs



def test_every_engine_call_shares_one_connection_pool(make_factory) -> None:
    """The SDK would make a pool per request URL (each exec id, each container path) and close the least
    recent past 25, under other threads' feet ("Pool is closed" at 32 sessions); the factory's client
    keeps one pool for the socket, and streamed execs and archive calls still get their own answers."""
    factory = make_factory(max_sandboxes=3)
    boxes = [factory.open(f"v1:pool{i}", {}) for i in range(3)]
    for i, sb in enumerate(boxes * 3):
        assert sb.exec(f"echo {i}", timeout=20).output == f"{i}\n"
        sb.write_file("f.txt", str(i).encode())
        assert sb.read_file("f.txt") == str(i).encode()
    for sb in boxes:
        sb.close()
    assert len(factory._api()._custom_adapter.pools) == 1  # DOCKER_HOST is a unix socket here


def test_runtime_is_the_containers_and_the_pools(make_factory, docker_client) -> None:
    """sandbox.runtime reaches every container the factory makes: a task's and a warm pool's."""
    need_runtime(docker_client, "crun")
    factory = make_factory(runtime="crun", warm_pool=1)
    task = factory.open("v1:crun", {})  # the pool starts filling now: this one starts a container of its own
    deadline = time.monotonic() + 60
    while not factory.pool.ready() and time.monotonic() < deadline:
        time.sleep(0.05)
    pooled = factory.open("v1:pooled", {})
    try:
        assert factory.pool.taken == 1
        for sb in (task, pooled):
            assert docker_client.api.inspect_container(sb.container_id)["HostConfig"]["Runtime"] == "crun"
            assert sb.exec("echo under crun", timeout=20).output == "under crun\n"
    finally:
        task.close()
        pooled.close()


def test_an_unknown_runtime_is_a_config_error_before_any_container(make_factory, docker_client) -> None:
    factory = make_factory(runtime="no-such-runtime")
    with pytest.raises(ConfigError) as err:
        factory.preflight({IMAGE})
    text = str(err.value)
    offered = sorted(docker_client.info().get("Runtimes") or {})
    assert "sandbox.runtime='no-such-runtime'" in text and f"it offers: {', '.join(offered)}" in text
    assert "dockerd --add-runtime no-such-runtime=" in text
    with pytest.raises(ConfigError):
        factory.open("v1:x", {})
    assert not docker_client.api.containers(all=True, filters={"label": f"{RUN_LABEL}={factory.run_id}"})
