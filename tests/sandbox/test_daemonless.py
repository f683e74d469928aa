"""The docker sandbox without a root Docker daemon (Podman's service, rootful and rootless) and under
gVisor (runsc registered with a private dockerd): per-row images, limits as the engine records and
enforces them, no network and no network interface left on the host, the reaper, and what the sandbox
says before any container about an engine that would fail every task or ignore the limits. The contract
suite (test_contract.py) runs over the same engines."""

from __future__ import annotations

import logging
import socket
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_exp.errors import ConfigError
from hermes_exp.sandbox.docker import OWNER_LABEL, RUN_LABEL, DockerSandboxFactory
from tests.sandbox.conftest import IMAGE, IMAGE2
from tests.sandbox.engines import Engine, host_links

pytestmark = [pytest.mark.docker, pytest.mark.slow]
PODMANS = ["podman", "podman-rootless"]
CGROUP_V1 = not Path("/sys/fs/cgroup/cgroup.controllers").exists()  # v1 or hybrid


@pytest.fixture
def engine_factory(private_engine: Callable[[str], Engine]) -> Iterator[Callable[..., Any]]:
    """engine_factory(name, **settings): a docker sandbox factory on the private engine `name`."""
    made: list[DockerSandboxFactory] = []

    def make(name: str, **settings: Any) -> DockerSandboxFactory:
        engine = private_engine(name)
        settings = {"image": IMAGE, "pull_timeout": 10, **engine.settings(), **settings}
        made.append(DockerSandboxFactory(run_id=f"test-{uuid.uuid4().hex[:10]}", **settings))
        return made[-1]

    yield make
    for factory in made:
        factory.shutdown()


@pytest.mark.parametrize("name", PODMANS)
def test_row_images_limits_and_no_network(name: str, engine_factory, private_engine) -> None:
    factory = engine_factory(name, memory_mb=96, cpus=0.5, pids_limit=32)
    before = host_links()
    default, other = factory.open("v1:a", {}), factory.open("v1:b", {"image": IMAGE2})
    try:
        assert "hermes-exp-test" in other.exec("cat /IMAGE2", timeout=10).output
        assert default.exec("cat /IMAGE2", timeout=10).exit_code != 0
        host = private_engine(name).client().api.inspect_container(default.container_id)["HostConfig"]
        assert host["NetworkMode"] == "none"
        if name == "podman" or not CGROUP_V1:
            assert host["Memory"] == 96 * 2**20 and host["NanoCpus"] == 5 * 10**8 and host["PidsLimit"] == 32
        else:  # rootless on cgroup v1 drops them (the sandbox warns: see the test below)
            assert host["Memory"] == 0 and not host["PidsLimit"]
        assert default.exec("ls /sys/class/net", timeout=10).output.split() == ["lo"]
        assert host_links() == before  # no veth, bridge or tap on the host
        if name == "podman":  # the kernel's own numbers: the limits are enforced, not just recorded
            out = default.exec("cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max",
                               timeout=10).output.split()
            assert out == [str(96 * 2**20), "32"]
    finally:
        default.close()
        other.close()
    factory.shutdown()
    assert host_links() == before


def test_rootless_podman_on_cgroup_v1_warns_that_limits_are_ignored(engine_factory, caplog) -> None:
    factory = engine_factory("podman-rootless")
    with caplog.at_level(logging.WARNING):
        factory.preflight({IMAGE})
    assert ("rootless Podman on cgroup v1: it ignores sandbox.memory_mb" in caplog.text) is CGROUP_V1


@pytest.mark.parametrize("name", PODMANS)
def test_reaper_on_podman(name: str, engine_factory, private_engine) -> None:
    factory = engine_factory(name)
    client = private_engine(name).client()
    keep = ["sh", "-c", "while :; do sleep 3600; done"]
    dead = client.containers.run(IMAGE, keep, detach=True, network_mode="none", labels={
        RUN_LABEL: factory.run_id, OWNER_LABEL: f"{socket.gethostname()}:{_dead_pid()}"})
    foreign = client.containers.run(IMAGE, keep, detach=True, network_mode="none",
                                    labels={RUN_LABEL: "test-other-run", OWNER_LABEL: "elsewhere:1"})
    try:
        factory.preflight(set())
        live = factory.open("v1:live", {})
        ids = {c["Id"] for c in client.api.containers(all=True)}
        assert dead.id not in ids and foreign.id in ids and live.container_id in ids
        factory.shutdown()
        ids = {c["Id"] for c in client.api.containers(all=True)}
        assert live.container_id not in ids and foreign.id in ids
    finally:
        foreign.remove(force=True)


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_runsc_without_its_network_flag_is_refused_before_any_container(engine_factory, private_engine) -> None:
    """Under dockerd, runsc without --network=none fails every container that has no network: the
    engine really does, and the sandbox says so (with the daemon.json fix) before making one."""
    client = private_engine("runsc").client()
    container = client.api.create_container(IMAGE, ["true"], host_config=client.api.create_host_config(
        network_mode="none", runtime="runsc-plain"))["Id"]
    try:
        with pytest.raises(Exception, match="network enabled in root network namespace"):
            client.api.start(container)
    finally:
        client.api.remove_container(container, force=True)
    factory = engine_factory("runsc", runtime="runsc-plain")
    with pytest.raises(ConfigError) as err:
        factory.preflight({IMAGE})
    assert "sandbox.runtime='runsc-plain'" in str(err.value) and '"--network=none"' in str(err.value)
    assert not client.api.containers(all=True, filters={"label": f"{RUN_LABEL}={factory.run_id}"})
    sb = engine_factory("runsc").open("v1:gvisor", {})  # the flagged registration runs
    try:
        assert "gVisor" in sb.exec("dmesg", timeout=20).output
    finally:
        sb.close()
