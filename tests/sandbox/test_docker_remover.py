"""Closed docker sandboxes removed in the background (`sandbox.remove_in_background`): the remover's
queue, backlog, failures and drain with plain callables; and against the real engine, a closed task's
container and background processes gone by shutdown, with the slot free before the removal ends."""

from __future__ import annotations

import logging
import threading

import pytest

from hermes_exp.errors import ConfigError
from hermes_exp.sandbox.docker import RUN_LABEL, DockerSandboxFactory
from hermes_exp.sandbox.docker_remover import Remover


def held_remover(backlog: int = 4) -> tuple[Remover, threading.Event, list[str]]:
    """A remover whose removals wait for `go`; returns it, `go`, and the ids removed in order."""
    go, removed = threading.Event(), []

    def remove(cid: str) -> bool:
        assert go.wait(30)
        removed.append(cid)
        return True

    return Remover(remove, backlog=backlog), go, removed


def test_submit_returns_before_the_removal_and_then_runs_after_it() -> None:
    remover, go, removed = held_remover()
    after: list[str] = []
    remover.submit("c1", then=lambda: after.append(f"then:{removed}"))
    assert remover.pending() == 1 and removed == []  # submit did not wait for the removal
    go.set()
    assert remover.drain(30) == 0
    assert removed == ["c1"] and after == ["then:['c1']"] and remover.removed == 1


def test_a_full_backlog_makes_submit_wait_for_room() -> None:
    remover, go, removed = held_remover(backlog=1)
    remover.submit("c1")
    second = threading.Thread(target=remover.submit, args=("c2",))
    second.start()
    second.join(0.3)
    assert second.is_alive(), "submit went past a full backlog"
    go.set()
    second.join(30)
    assert remover.drain(30) == 0 and removed == ["c1", "c2"]


def test_failed_removals_are_logged_and_the_then_still_runs(caplog: pytest.LogCaptureFixture) -> None:
    def remove(cid: str) -> bool:
        if cid == "boom":
            raise RuntimeError("engine said no")
        return cid != "refused"

    remover, after = Remover(remove), []
    for cid in ("ok", "refused", "boom"):
        remover.submit(cid, then=lambda cid=cid: after.append(cid))
    with caplog.at_level(logging.WARNING):
        assert remover.drain(30) == 0
    assert sorted(after) == ["boom", "ok", "refused"] and remover.removed == 1
    text = caplog.text
    assert "2 container(s) could not be removed" in text and "refused" in text and "boom" in text
    assert "engine said no" in text  # the exception, logged with its traceback


def test_drain_gives_up_after_its_timeout_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    remover, go, _ = held_remover()
    remover.submit("stuck")
    with caplog.at_level(logging.WARNING):
        assert remover.drain(0.2) == 1
    assert "1 container removal(s) still queued" in caplog.text
    go.set()
    assert remover.drain(30) == 0


def test_remove_in_background_must_be_a_flag() -> None:
    with pytest.raises(ConfigError) as err:
        DockerSandboxFactory(remove_in_background="no")
    assert "sandbox.remove_in_background" in str(err.value)


def run_containers(docker_client, run_id: str) -> set[str]:
    return {c["Id"] for c in docker_client.api.containers(all=True, filters={"label": f"{RUN_LABEL}={run_id}"})}


@pytest.mark.docker
@pytest.mark.parametrize("background", [True, False])
def test_closed_tasks_and_their_background_processes_are_gone_by_shutdown(make_factory, docker_client,
                                                                          background: bool) -> None:
    factory = make_factory(max_sandboxes=1, remove_in_background=background)
    closed = []
    for i in range(3):  # one slot: each open waits for the close before it, never for its removal
        sb = factory.open(f"v1:bg{i}", {})
        proc = sb.spawn("sleep 1000")
        assert sb.exec("echo hi", timeout=20).output == "hi\n"
        sb.close()
        closed.append((sb.container_id, proc))
    factory.shutdown()
    assert not run_containers(docker_client, factory.run_id) & {cid for cid, _ in closed}
    assert all(proc.exit_code() is not None for _, proc in closed), "a background process outlived its sandbox"


@pytest.mark.docker
def test_a_closed_container_on_a_network_runs_nothing_while_it_waits(make_factory, docker_client) -> None:
    import docker

    sb = make_factory(network=True).open("v1:net", {})
    sb.close()
    try:
        assert not docker_client.api.inspect_container(sb.container_id)["State"]["Running"]
    except docker.errors.NotFound:
        pass  # removed already
