"""sandbox=docker through the real CLI against a real engine: per-row images, a missing image failing
only its tasks, no container outliving a run (even a SIGKILLed one), no network, no runner secrets."""

from __future__ import annotations

import hashlib
import ipaddress
import json
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import done_rows, read_jsonl, run_cli, write_dataset

from hermes_exp.mock.server import MockServer
from hermes_exp.sandbox.docker import RUN_LABEL
from tests.sandbox.conftest import IMAGE, IMAGE2, docker_problem, need_runtime, unavailable

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def engine() -> Any:
    """The raw engine client, for looking at containers from outside the runner. Skips outside CI
    when there is no engine; fails with CI=true."""
    problem = docker_problem()
    if problem:
        unavailable(problem)
    import docker

    return docker.from_env()


@pytest.fixture
def reap(engine: Any) -> Iterator[list[str]]:
    """Run ids whose containers are force-removed after the test, so a failing test leaves none."""
    run_ids: list[str] = []
    yield run_ids
    for rid in run_ids:
        for cid in containers_of(engine, rid):
            engine.api.remove_container(cid, force=True, v=True)


def run_id(cwd: Path, run_name: str) -> str:
    """The runner's container label for a run: derived from the run directory, as run.py does."""
    run_dir = (cwd / "outputs" / run_name).resolve()
    return "hx-" + hashlib.blake2b(str(run_dir).encode(), digest_size=6).hexdigest()


def containers_of(engine: Any, rid: str) -> list[str]:
    """IDs of the run's containers (the low-level list: no per-container inspect racing removals)."""
    return [c["Id"] for c in engine.api.containers(all=True, filters={"label": f"{RUN_LABEL}={rid}"})]


def docker_args(data: Path, run_name: str, base_url: str | None = None, *extra: str) -> list[str]:
    args = [f"dataset.path={data}", f"run_name={run_name}", "sandbox=docker", f"sandbox.image={IMAGE}",
            "sandbox.pull_timeout=20", "num_workers=4", *extra]
    return args + ([f"model.base_url={base_url}"] if base_url else [])


def tool_outputs(trajectory: dict[str, Any]) -> list[dict[str, Any]]:
    """The `content` of every tool response of a ShareGPT trajectory."""
    out = []
    for turn in trajectory["conversations"]:
        if turn["from"] == "tool":
            body = turn["value"].removeprefix("<tool_response>\n").removesuffix("\n</tool_response>")
            out.append(json.loads(body)["content"])
    return out


def ledger_rows(out: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(out / "ledger.db") as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("SELECT prompt_index, state, error_class, error FROM tasks")]


def test_rows_choose_images_missing_image_fails_only_its_tasks(tmp_path: Path, engine: Any, reap) -> None:
    reap.append(run_id(tmp_path, "images"))
    missing = f"hermes-exp-test/missing-{uuid.uuid4().hex[:8]}:latest"
    rows: list[dict[str, Any]] = []
    for i in range(20):
        row: dict[str, Any] = {"prompt": f"RUN: cat /IMAGE2 || echo none\nWhich image am I in? ({i})", "n": i}
        if i % 5 == 4:
            row["image"] = missing
        elif i % 3 == 0:
            row["image"] = IMAGE2
        elif i % 3 == 1:
            row["image"] = IMAGE  # named explicitly; the others fall back to sandbox.image
        rows.append(row)
    data = write_dataset(tmp_path / "p.jsonl", rows)
    result = run_cli(tmp_path, *docker_args(data, "images"), timeout=300)
    assert result.returncode == 3, result.stderr  # some tasks failed
    out = tmp_path / "outputs" / "images"

    ledger = {r["prompt_index"]: r for r in ledger_rows(out)}
    assert len(ledger) == 20
    for i, row in enumerate(rows):
        if row.get("image") == missing:
            assert ledger[i]["state"] == "error" and ledger[i]["error_class"] == "sandbox", ledger[i]
            assert missing in ledger[i]["error"]
        else:
            assert ledger[i]["state"] == "done", ledger[i]

    trajectories = read_jsonl(out / "trajectories.jsonl")
    assert sorted(t["prompt_index"] for t in trajectories) == [i for i, r in enumerate(rows) if r.get("image") != missing]
    for t in trajectories:
        [probe] = tool_outputs(t)
        assert probe["exit_code"] == 0
        if rows[t["prompt_index"]].get("image") == IMAGE2:
            assert IMAGE2 in probe["output"] and "none" not in probe["output"]
        else:
            assert "none" in probe["output"] and IMAGE2 not in probe["output"]
    stats = json.loads((out / "statistics.json").read_text())
    assert stats["failed"] == 4 and stats["kept"] == 16
    assert not containers_of(engine, run_id(tmp_path, "images")), "containers outlived the run"


def test_a_missing_sandbox_image_fails_the_run_before_any_task(tmp_path: Path, engine: Any, reap) -> None:
    """Every row without an image of its own runs in sandbox.image: when the engine has it not and cannot
    pull it, the run stops at its preflight (it used to fail every task one by one as class sandbox)."""
    reap.append(run_id(tmp_path, "noimage"))
    missing = f"hermes-exp-test/missing-{uuid.uuid4().hex[:8]}:latest"
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"RUN: echo {i}\nSay {i}"} for i in range(3)])
    result = run_cli(tmp_path, *docker_args(data, "noimage"), f"sandbox.image={missing}", "sandbox.pull_timeout=5")
    assert result.returncode == 2, result.stderr
    assert f"sandbox.image: docker image '{missing}' is not available" in result.stderr
    assert "sandbox.image=<another>" in result.stderr
    assert ledger_rows(tmp_path / "outputs" / "noimage") == []  # not one task started (or failed)


def test_sigkilled_run_leaves_containers_that_the_rerun_reaps(tmp_path: Path, engine: Any, reap) -> None:
    n = 24
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"RUN: sleep 1\nKill me {i}"} for i in range(n)])
    rid = run_id(tmp_path, "killed")
    reap.append(rid)
    with MockServer(latency_ms=300) as server:
        args = docker_args(data, "killed", server.base_url)
        log = tmp_path / "killed.log"
        with log.open("w") as err:
            proc = subprocess.Popen([sys.executable, "-m", "hermes_exp.cli", *args], cwd=tmp_path,
                                    stdout=subprocess.DEVNULL, stderr=err)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and proc.poll() is None:
                if done_rows(tmp_path / "outputs" / "killed" / "ledger.db") >= 2 and containers_of(engine, rid):
                    break
                time.sleep(0.05)
            assert proc.poll() is None, f"the run ended before it could be killed: {log.read_text()}"
            proc.send_signal(signal.SIGKILL)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
        left = containers_of(engine, rid)
        assert left, "no live container at the kill: the test proves nothing"
        assert done_rows(tmp_path / "outputs" / "killed" / "ledger.db") < n

        final = run_cli(tmp_path, *args, timeout=300)
    assert final.returncode == 0, final.stderr
    assert done_rows(tmp_path / "outputs" / "killed" / "ledger.db") == n
    assert sorted(t["prompt_index"] for t in read_jsonl(tmp_path / "outputs" / "killed" / "trajectories.jsonl")) \
        == list(range(n))
    assert not containers_of(engine, rid), "the killed run's containers were not reaped"


def bridge_gateway(engine: Any) -> str:
    """The host's address on the default bridge, as containers see it. An engine that starts on a machine
    where no engine ran before (no docker0 yet) reports the IPAM config without `Gateway`, so it is read
    from there only when present, else from the bridge interface, else as the subnet's first address."""
    network = engine.api.inspect_network("bridge")
    config = network["IPAM"]["Config"][0]
    if config.get("Gateway"):
        return config["Gateway"].split("/")[0]
    bridge = network.get("Options", {}).get("com.docker.network.bridge.name", "docker0")
    shown = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", bridge], capture_output=True, text=True,
                           check=False) if shutil.which("ip") else None
    for word in shown.stdout.split() if shown else []:
        if "/" in word and word[0].isdigit():
            return word.split("/")[0]
    return str(next(ipaddress.ip_network(config["Subnet"]).hosts()))


@pytest.fixture
def host_listener(engine: Any) -> Iterator[tuple[str, int, list[int]]]:
    """A TCP listener on every host interface, at the address containers see as the bridge gateway.
    Yields (gateway, port, connections accepted)."""
    gateway = bridge_gateway(engine)
    server = socket.create_server(("0.0.0.0", 0))
    server.settimeout(0.2)
    accepted: list[int] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            accepted.append(1)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield gateway, server.getsockname()[1], accepted
    stop.set()
    thread.join(5)
    server.close()


def test_no_network_and_no_runner_secrets_inside(tmp_path: Path, engine: Any, host_listener, mock_server,
                                                 reap) -> None:
    gateway, port, accepted = host_listener
    reap.extend(run_id(tmp_path, name) for name in ("nonet", "net"))
    secret = f"s3cret-{uuid.uuid4().hex}"
    probe = f"RUN: nc -w 3 {gateway} {port} </dev/null && echo REACHED || echo UNREACHABLE"
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"{probe}\nnetwork probe"},
                                                {"prompt": "RUN: env\nshow the environment"}])
    env = {"HX_E2E_SECRET": secret, "OPENAI_API_KEY": secret}

    def outputs(run_name: str, *extra: str) -> dict[int, str]:
        result = run_cli(tmp_path, *docker_args(data, run_name, mock_server.base_url, *extra), env=env, timeout=180)
        assert result.returncode == 0, result.stderr
        out = tmp_path / "outputs" / run_name
        assert secret not in (out / "trajectories.jsonl").read_text()
        assert not containers_of(engine, run_id(tmp_path, run_name))
        return {t["prompt_index"]: tool_outputs(t)[0]["output"]
                for t in read_jsonl(out / "trajectories.jsonl")}

    isolated = outputs("nonet")
    assert "UNREACHABLE" in isolated[0] and "REACHED\n" not in isolated[0].replace("UNREACHABLE", "")
    assert not accepted, "a sandbox with network=false connected to the host"
    assert "PATH=" in isolated[1] and "HX_E2E_SECRET" not in isolated[1] and "OPENAI_API_KEY" not in isolated[1]

    # The control: the same probe with sandbox.network=true does get through, so the probe can tell.
    networked = outputs("net", "sandbox.network=true")
    assert "REACHED" in networked[0].replace("UNREACHABLE", "") and accepted
    assert "HX_E2E_SECRET" not in networked[1]


def runtimes(engine: Any) -> list[str]:
    return sorted(engine.info().get("Runtimes") or {})


def test_sandbox_runtime_crun_runs_the_containers_under_crun(tmp_path: Path, engine: Any, reap) -> None:
    """sandbox.runtime=crun: the run's containers (looked at while a task's command runs) are crun's."""
    need_runtime(engine, "crun")
    rid = run_id(tmp_path, "crun")
    reap.append(rid)
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"RUN: sleep 2; echo ran {i}\nSay {i}"} for i in range(3)])
    seen: list[str] = []
    with MockServer(latency_ms=50) as server:
        proc = subprocess.Popen([sys.executable, "-m", "hermes_exp.cli",
                                 *docker_args(data, "crun", server.base_url, "sandbox.runtime=crun")],
                                cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            while proc.poll() is None and not seen:
                for cid in containers_of(engine, rid):
                    try:
                        seen.append(engine.api.inspect_container(cid)["HostConfig"]["Runtime"])
                    except Exception:  # removed between the list and the inspect
                        pass
                time.sleep(0.05)
            _, err = proc.communicate(timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, err
    assert seen and set(seen) == {"crun"}, seen
    outputs = [tool_outputs(t)[0]["output"] for t in read_jsonl(tmp_path / "outputs" / "crun" / "trajectories.jsonl")]
    assert sorted(outputs) == [f"ran {i}\n" for i in range(3)]


def test_an_unknown_sandbox_runtime_fails_the_run_before_any_task(tmp_path: Path, engine: Any, reap) -> None:
    reap.append(run_id(tmp_path, "noruntime"))
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"RUN: echo {i}\nSay {i}"} for i in range(3)])
    result = run_cli(tmp_path, *docker_args(data, "noruntime"), "sandbox.runtime=no-such-runtime")
    assert result.returncode == 2, result.stderr
    offered = runtimes(engine)
    assert "sandbox.runtime='no-such-runtime' is not a runtime of the Docker engine" in result.stderr
    assert f"it offers: {', '.join(offered)}" in result.stderr and "runc" in offered
    assert "dockerd --add-runtime no-such-runtime=" in result.stderr
    assert ledger_rows(tmp_path / "outputs" / "noruntime") == []  # not one task started (or failed)
    assert not containers_of(engine, run_id(tmp_path, "noruntime"))
