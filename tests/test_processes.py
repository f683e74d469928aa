"""Signals and processes at the CLI, seen in process listings: nothing a run starts outlives it (tool
commands in their own sessions, executor workers), a second Ctrl-C does not cut the cleanup short, and
a refused or killed invocation leaves nothing behind (config snapshot, status files)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from conftest import done_rows, run_cli, write_dataset

from hermes_exp.mock.server import MockServer
from hermes_exp.run.lock import RunLock
from hermes_exp.sandbox import grouplog


def _procs(needle: str, where: str) -> list[int]:
    """Pids whose cmdline or environment (`where`) holds `needle`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            data = (entry / where).read_bytes()
        except OSError:
            continue
        if needle.encode() in data:
            found.append(int(entry.name))
    return found


def _wait_for(predicate, seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def _start(cwd: Path, *args: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "hermes_exp.cli", *args], cwd=cwd, text=True,
                            env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _recorded() -> set[int]:
    """The tool commands any runner's command log records as running."""
    found: set[int] = set()
    try:
        logs = list((Path(tempfile.gettempdir()) / "hermes-exp-procs").glob(f"*/{grouplog.PREFIX}*"))
    except OSError:  # another test's run folder was removed while the glob listed it: look again
        return _recorded()
    for log in logs:
        try:
            found.update(grouplog.running(log.read_text("ascii", "replace")))
        except OSError:
            pass  # removed as it was read
    return found


def _left(token: str, marker: str) -> list[int]:
    """Processes of a run still alive: runner-side ones carry `token` in their environment, tool
    commands (clean environment) carry `marker` in their command line."""
    return _procs(token, "environ") + _procs(marker, "cmdline")


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["processes", "threads"])
def test_sigkill_of_the_runner_alone_leaves_no_workers_or_commands(tmp_path: Path, executor: str) -> None:
    token, marker = f"HXTOKEN{uuid.uuid4().hex}", f"hxmark{uuid.uuid4().hex[:10]}"
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"RUN: sleep 60 # {marker}\nKill {i}"} for i in range(8)])
    with MockServer(latency_ms=10) as server:
        args = [f"dataset.path={data}", "run_name=k9", "num_workers=2", f"executor={executor}", "sandbox=local",
                f"model.base_url={server.base_url}", f"sandbox.root={tmp_path / 'sb'}"]
        proc = _start(tmp_path, *args, env={"HX_TEST_TOKEN": token})
        assert _wait_for(lambda: len(_procs(marker, "cmdline")) >= 2), "tool commands never started"
        # a command is recorded for the reaper just after it starts: kill once both are on record (a kill in
        # between, on a loaded machine, is the one case no record can cover)
        assert _wait_for(lambda: set(_procs(marker, "cmdline")) <= _recorded()), "commands never recorded"
        if executor == "processes":
            assert len(_procs(token, "environ")) >= 3  # the runner, its loky workers, its watchdog
        os.kill(proc.pid, signal.SIGKILL)  # the runner alone, not its process group
        proc.communicate(timeout=30)
        assert _wait_for(lambda: not _left(token, marker), 30), \
            [Path(f"/proc/{p}/cmdline").read_bytes() for p in _left(token, marker)]


@pytest.mark.slow
def test_the_next_invocation_reaps_what_a_killed_run_left(tmp_path: Path) -> None:
    token, marker = f"HXTOKEN{uuid.uuid4().hex}", f"hxmark{uuid.uuid4().hex[:10]}"
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"RUN: sleep 60 # {marker}\nReap {i}"} for i in range(2)])
    with MockServer(latency_ms=10) as server:
        args = [f"dataset.path={data}", "run_name=reap", "num_workers=2", "sandbox=local",
                f"model.base_url={server.base_url}", f"sandbox.root={tmp_path / 'sb'}", "tools.terminal_timeout=90"]
        proc = _start(tmp_path, *args, env={"HX_TEST_TOKEN": token})
        assert _wait_for(lambda: len(_procs(marker, "cmdline")) == 2), "tool commands never started"
        for pid in _procs(token, "environ"):  # everything with the runner's environment: watchdog included
            os.kill(pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        assert len(_procs(marker, "cmdline")) == 2  # left running: nothing could clean up
        short = write_dataset(tmp_path / "q.jsonl", [{"prompt": "RUN: true\nNext"}])
        args[0] = f"dataset.path={short}"
        assert run_cli(tmp_path, *args).returncode == 0
    assert not _procs(marker, "cmdline")


@pytest.mark.slow
def test_a_second_ctrl_c_during_shutdown_still_cleans_up(tmp_path: Path) -> None:
    token, marker = f"HXTOKEN{uuid.uuid4().hex}", f"hxmark{uuid.uuid4().hex[:10]}"
    rows = [{"prompt": f"RUN: sleep {0.2 if i % 4 else 30} # {marker}\nTwice {i}"} for i in range(40)]
    data = write_dataset(tmp_path / "p.jsonl", rows)
    with MockServer(latency_ms=20) as server:
        # threads: the tasks in flight are the parent's, so the shutdown waits resume.grace_seconds for them,
        # and the second signal surely comes during that wait (with processes it could come after the exit)
        args = [f"dataset.path={data}", "run_name=twice", "num_workers=4", "executor=threads", "sandbox=local",
                f"model.base_url={server.base_url}", f"sandbox.root={tmp_path / 'sb'}", "tools.terminal_timeout=90"]
        proc = _start(tmp_path, *args, env={"HX_TEST_TOKEN": token})
        ledger = tmp_path / "outputs" / "twice" / "ledger.db"
        assert _wait_for(lambda: done_rows(ledger) >= 3 and _procs(marker, "cmdline"))
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "nothing was changed" not in stderr and "Traceback" not in stderr, stderr
    assert "To resume, run the same command again" in stderr
    assert "already stopping" in stderr, "the second signal did not come during the shutdown"
    assert done_rows(ledger) >= 3
    assert not list((tmp_path / "sb").iterdir()), "task directories left after a second Ctrl-C"
    assert _wait_for(lambda: not _left(token, marker), 30)


def test_a_refused_second_invocation_keeps_the_running_runs_snapshot(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "Snapshot"}])
    assert run_cli(tmp_path, f"dataset.path={data}", "run_name=snap", "max_turns=7").returncode == 0
    run_dir = tmp_path / "outputs" / "snap"
    before = {p.name: p.read_bytes() for p in (run_dir / ".hydra").iterdir()}
    assert {"config.yaml", "hydra.yaml", "overrides.yaml"} <= set(before)
    assert b"max_turns: 7" in before["config.yaml"]
    with RunLock(run_dir):
        refused = run_cli(tmp_path, f"dataset.path={data}", "run_name=snap", "max_turns=3")
    assert refused.returncode == 2 and "in use by another hermes-exp process" in refused.stderr
    assert {p.name: p.read_bytes() for p in (run_dir / ".hydra").iterdir()} == before


def test_status_files_of_killed_invocations_do_not_pile_up(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"RUN: sleep 5\nStatus {i}"} for i in range(4)])
    proc = _start(tmp_path, f"dataset.path={data}", "run_name=status", env={"TMPDIR": str(tmp)})
    assert _wait_for(lambda: list(tmp.glob(f"hermes-exp-status-{proc.pid}-*")))
    os.killpg(proc.pid, signal.SIGKILL) if os.getpgid(proc.pid) == proc.pid else proc.kill()
    proc.communicate(timeout=30)
    assert list(tmp.glob(f"hermes-exp-status-{proc.pid}-*"))  # SIGKILL: nobody could remove it
    assert run_cli(tmp_path, "--cfg", "job", env={"TMPDIR": str(tmp)}).returncode == 0  # --help answers before any of that
    assert not list(tmp.glob("hermes-exp-status-*"))
