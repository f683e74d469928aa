"""Background processes (terminal(background=true) + the `process` tool) on every backend: output,
stdin, kill, and nothing left running after the sandbox closes or the runner is interrupted — checked
in the host's process list, which shows the processes of bwrap namespaces and containers too."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from hermes_exp.errors import ToolError
from hermes_exp.tools.process import process
from hermes_exp.tools.terminal import terminal
from tests.sandbox.conftest import TARGETS, Backend

LIMITS = {"max_output_chars": 2000, "terminal_timeout": 20}


def marker_sleep() -> tuple[str, str]:
    """A sleep whose command line is unique on this host, so the process list can find it."""
    seconds = f"{random.randint(500, 900)}.{random.randint(10**8, 10**9)}"
    return f"sleep {seconds}", seconds


def running(marker: str) -> list[int]:
    """Host pids of `sleep <marker>` (not the shells that mention it; zombies have no cmdline)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().decode("utf-8", "replace").split("\0")
            except OSError:
                continue
            if os.path.basename(argv[0]) == "sleep" and marker in argv[1:]:
                found.append(int(entry.name))
    return found


def gone(marker: str, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while running(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def call(sandbox, **args):
    return process(sandbox, args, LIMITS)


def start(sandbox, command: str) -> str:
    result = terminal(sandbox, {"command": command, "background": True}, LIMITS)
    assert result["output"] == "Background process started" and result["error"] is None
    return result["session_id"]


def wait_output(sandbox, sid: str, text: str, within: float = 10.0) -> str:
    seen = ""
    deadline = time.monotonic() + within
    while text not in seen and time.monotonic() < deadline:
        seen += call(sandbox, action="poll", session_id=sid)["output"]
        time.sleep(0.05)
    assert text in seen, seen
    return seen


def test_output_stdin_and_exit_code(sandbox) -> None:
    sid = start(sandbox, "echo ready; while read line; do echo got:$line; done; echo bye; exit 7")
    wait_output(sandbox, sid, "ready")
    assert call(sandbox, action="poll", session_id=sid)["status"] == "running"
    call(sandbox, action="submit", session_id=sid, data="one")
    call(sandbox, action="write", session_id=sid, data="two\n")
    wait_output(sandbox, sid, "got:two")
    call(sandbox, action="close", session_id=sid)
    done = call(sandbox, action="wait", session_id=sid, timeout=10)
    assert done["status"] == "exited" and done["exit_code"] == 7 and not done["timed_out"]
    assert "bye" in done["output"]
    log = call(sandbox, action="log", session_id=sid)
    assert log["output"].splitlines() == ["ready", "got:one", "got:two", "bye"] and log["total_lines"] == 4
    assert call(sandbox, action="log", session_id=sid, offset=1, limit=2)["output"] == "got:one\ngot:two"
    assert [p["session_id"] for p in call(sandbox, action="list")["processes"]] == [sid]
    with pytest.raises(ToolError, match="closed|exited"):
        call(sandbox, action="write", session_id=sid, data="late")


def test_kill_stops_the_whole_tree(sandbox) -> None:
    sleep, marker = marker_sleep()
    sid = start(sandbox, f"{sleep} & {sleep} & echo up; wait")
    wait_output(sandbox, sid, "up")
    assert len(running(marker)) == 2
    assert call(sandbox, action="kill", session_id=sid)["status"] == "killed"
    assert gone(marker)
    assert call(sandbox, action="poll", session_id=sid)["status"] == "exited"


def test_wait_times_out_without_error(sandbox) -> None:
    sleep, marker = marker_sleep()
    sid = start(sandbox, sleep)
    result = call(sandbox, action="wait", session_id=sid, timeout=1)
    assert result["timed_out"] and result["status"] == "running" and result["error"] is None


def test_unknown_session_and_action_are_tool_errors(sandbox) -> None:
    with pytest.raises(ToolError, match="no background process 'proc_nope'"):
        call(sandbox, action="poll", session_id="proc_nope")
    with pytest.raises(ToolError, match="unknown action"):
        call(sandbox, action="explode")
    with pytest.raises(ToolError, match="session_id"):
        call(sandbox, action="kill")


def test_background_processes_die_with_the_sandbox(open_sandbox) -> None:
    sandbox = open_sandbox()
    sleep, marker = marker_sleep()
    sid = start(sandbox, f"{sleep} & {sleep}")
    deadline = time.monotonic() + 10
    while len(running(marker)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(running(marker)) == 2
    sandbox.close()
    assert gone(marker), f"{sid} outlived its sandbox"
    with pytest.raises(Exception):
        sandbox.spawn("true")


DRIVER = textwrap.dedent("""
    import json, sys
    from hydra.utils import instantiate
    factory = instantiate({"_target_": sys.argv[1], **json.loads(sys.argv[2])})
    sandbox = factory.open("v1:bg-sigint", {})
    try:
        sandbox.spawn(sys.argv[3])
        print("started", flush=True)
        sandbox.exec("sleep 60", timeout=120)
    finally:
        sandbox.close()
        factory.shutdown()
""")


def test_background_processes_die_after_sigint_of_runner(backend: Backend) -> None:
    sleep, marker = marker_sleep()
    kwargs = {**backend.settings(), "run_id": f"test-{uuid.uuid4().hex[:10]}"}
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, TARGETS[backend.name], json.dumps(kwargs), sleep],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "started", proc.stderr.read()
        deadline = time.monotonic() + 10
        while not running(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert running(marker)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    assert gone(marker)


def test_stdin_stays_open_while_other_commands_run(sandbox) -> None:
    """A process reading its stdin keeps it while the agent runs other commands in the same sandbox."""
    sid = start(sandbox, "echo ready; while read line; do echo got:$line; done; echo eof")
    wait_output(sandbox, sid, "ready")
    for i in range(3):
        assert terminal(sandbox, {"command": f"echo fg{i}"}, LIMITS)["output"].strip() == f"fg{i}"
        call(sandbox, action="submit", session_id=sid, data=f"line{i}")
        wait_output(sandbox, sid, f"got:line{i}")
        assert call(sandbox, action="poll", session_id=sid)["status"] == "running"
    call(sandbox, action="close", session_id=sid)
    done = call(sandbox, action="wait", session_id=sid, timeout=10)
    assert done["status"] == "exited" and done["exit_code"] == 0
    assert call(sandbox, action="log", session_id=sid)["output"].splitlines() == [
        "ready", "got:line0", "got:line1", "got:line2", "eof"]


def test_a_host_background_command_holds_no_stdin_buffer(tmp_path: Path) -> None:
    # stdin is fed with os.write on its descriptor: a buffered writer would hold an unused 8 KiB buffer
    # for each background command's whole life (1024 sessions, bench/RESULTS.md seventh pass)
    import io

    from hermes_exp.sandbox.background import HostBackground
    from hermes_exp.sandbox.process import clean_env

    bg = HostBackground("proc_000000000001", ["/bin/sh", "-c", "read line; echo got:$line"], "read",
                        cwd=str(tmp_path), env=clean_env(str(tmp_path)), live=set())
    try:
        assert isinstance(bg._proc.stdin, io.FileIO)
        bg.write(b"one\n")
        bg.close_stdin()
        deadline = time.time() + 10
        while bg.exit_code() is None and time.time() < deadline:
            time.sleep(0.02)
        assert bg.exit_code() == 0
    finally:
        bg.kill()
