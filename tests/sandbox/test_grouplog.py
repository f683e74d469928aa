"""The reaper's records of tool commands (sandbox/grouplog.py, reaper.py), with real processes: a runner
killed mid-command leaves a log from which the next reap kills the command; a pid now held by a process
that started after the record is spared; a live process's log stays while the commands it names are
killed; rotation, a cleared folder and a fork keep every running command recorded; the older one-file-
per-command records are still reaped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from hermes_exp.sandbox import grouplog
from hermes_exp.sandbox.grouplog import GroupLog, boot_ticks, running
from hermes_exp.sandbox.local import _Recorded
from hermes_exp.sandbox.process import clean_env, run_group
from hermes_exp.sandbox.reaper import GROUP, ProcRegistry, reap, registry_dir, start_time


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _gone(pid: int, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not _alive(pid)


def _sleeper() -> subprocess.Popen:
    """A process in its own session, as a tool command runs."""
    return subprocess.Popen(["sleep", "60"], start_new_session=True)


def _logs(where: Path) -> list[Path]:
    return sorted(where.glob(grouplog.PREFIX + "*"))


def test_a_command_has_started_by_the_time_recorded_just_after_its_spawn() -> None:
    # the identity rule's premise, on this kernel: /proc's start time and CLOCK_BOOTTIME are one clock
    for _ in range(20):
        before = boot_ticks()
        proc = _sleeper()
        after = boot_ticks()
        try:
            assert before <= int(start_time(proc.pid)) <= after
        finally:
            proc.kill()
            proc.wait()


def test_a_killed_runners_commands_are_reaped_from_its_log_and_the_log_goes(tmp_path: Path) -> None:
    run_id, marker = f"gl-{uuid.uuid4().hex[:8]}", f"hxgl{uuid.uuid4().hex[:8]}"
    script = textwrap.dedent(f"""
        import threading, time
        from hermes_exp.sandbox.local import LocalSandboxFactory
        box = LocalSandboxFactory(run_id={run_id!r}, root={str(tmp_path)!r}).open("k", {{}})
        for _ in range(2):
            # the marker in two pieces: this runner's own command line must not match it
            threading.Thread(target=box.exec, args=("sleep 60 # " + {marker[:4]!r} + {marker[4:]!r}, 90),
                             daemon=True).start()
        time.sleep(60)
    """)
    runner = subprocess.Popen([sys.executable, "-c", script])
    where = registry_dir(run_id)
    try:
        deadline = time.monotonic() + 30
        while len(_marked(marker)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        commands = _marked(marker)
        assert len(commands) == 2
        runner.kill()  # SIGKILL: the runner cleans nothing up
        runner.wait()
        assert all(_alive(pid) for pid in commands)
        assert len(_logs(where)) == 1
        assert reap(where) == 2
        assert all(_gone(pid) for pid in commands)
        assert not _logs(where)  # its process is gone: so is its log
    finally:
        runner.kill()
        for pid in _marked(marker):
            os.kill(pid, signal.SIGKILL)
        subprocess.run(["rm", "-rf", str(where)])


def _marked(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def test_a_pid_held_by_a_process_started_after_the_record_is_spared(tmp_path: Path) -> None:
    reused, ours = _sleeper(), _sleeper()
    try:
        started = int(start_time(reused.pid))
        log = tmp_path / f"{grouplog.PREFIX}1-dead.log"  # a dead runner's log: nobody holds it
        # the first "started by" a tick before the process did: the pid was a finished command's
        log.write_text(f"+{reused.pid} {started - 1}\n+{ours.pid} {boot_ticks()}\n")
        assert reap(tmp_path) == 1
        assert _gone(ours.pid)
        assert _alive(reused.pid)
        assert not log.exists()
    finally:
        for proc in (reused, ours):
            proc.kill()
            proc.wait()


def test_a_live_processs_log_stays_while_the_commands_it_names_are_killed(tmp_path: Path) -> None:
    log = GroupLog(tmp_path)
    command = _sleeper()
    try:
        log.add(command.pid)
        assert reap(tmp_path, kinds=(GROUP,)) == 1  # as a shutdown reap in the same process does
        command.wait(timeout=10)
        assert _logs(tmp_path) == [log.path]  # we hold it: we keep writing there
        log.discard(command.pid)
        assert running(log.path.read_text()) == {}
        log.close()
        assert not _logs(tmp_path)
    finally:
        command.kill()
        command.wait()


def test_rotation_keeps_exactly_the_running_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grouplog, "ROTATE_BYTES", 256)
    log = GroupLog(tmp_path)
    for pid in range(1000, 1100):
        log.add(pid)
        if pid % 10:
            log.discard(pid)
    files = _logs(tmp_path)
    assert files == [log.path]
    assert set(running(files[0].read_text())) == set(range(1000, 1100, 10))
    assert files[0].stat().st_size < 512  # rotated: not 100 commands' worth of lines
    for pid in range(1000, 1100, 10):
        log.discard(pid)
    log.close()
    assert not _logs(tmp_path)


def test_a_process_that_exits_with_nothing_running_leaves_no_log_or_folder(tmp_path: Path) -> None:
    where = tmp_path / "records"
    script = textwrap.dedent(f"""
        from pathlib import Path
        from hermes_exp.sandbox.grouplog import GroupLog
        log = GroupLog(Path({str(where)!r}))
        log.add(4242)
        log.discard(4242)
        assert log.path.exists()
    """)  # no close: an executor worker that ends with its pool, its sandboxes never shut down
    subprocess.run([sys.executable, "-c", script], check=True)
    assert not where.exists()


def test_only_whole_lines_of_a_log_count() -> None:
    assert running("+100 5\n+200 6\n-100\n+300 7") == {200: 6}  # "+300 7" may be "+300 71" being written
    assert running("+100 5\n+200 6\n-1") == {100: 5, 200: 6}  # "-1" may be "-100"
    assert running("+100 5\n+2x0 6\n+300\n\n") == {100: 5}


def test_a_cleared_folder_is_made_again_with_the_running_commands(tmp_path: Path) -> None:
    where = tmp_path / "records"
    log = GroupLog(where)
    log.add(4001)
    subprocess.run(["rm", "-rf", str(where)], check=True)  # someone cleaned /tmp under a running run
    log.add(4002)
    assert set(running(log.path.read_text())) == {4001, 4002}
    assert _logs(where) == [log.path]


def test_a_forked_child_keeps_its_own_log(tmp_path: Path) -> None:
    log = GroupLog(tmp_path)
    log.add(5001)
    pid = os.fork()
    if pid == 0:  # the child: records its own command, not the parent's
        try:
            log.add(5002)
        finally:
            os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    texts = {path: running(path.read_text()) for path in _logs(tmp_path)}
    assert texts.pop(log.path) == {5001: running(log.path.read_text())[5001]}
    assert [set(t) for t in texts.values()] == [{5002}]


def test_the_one_file_per_command_records_of_earlier_versions_are_still_reaped(tmp_path: Path) -> None:
    ours, other = _sleeper(), _sleeper()
    try:
        (tmp_path / f"group-{ours.pid}").write_text(start_time(ours.pid))
        (tmp_path / f"group-{other.pid}").write_text(str(int(start_time(other.pid)) - 1))  # a reused pid
        assert reap(tmp_path) == 1
        assert _gone(ours.pid) and _alive(other.pid)
        assert not list(tmp_path.iterdir())
    finally:
        for proc in (ours, other):
            proc.kill()
            proc.wait()


def test_a_command_whose_record_cannot_be_written_is_still_killed_and_reaped(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    registry = ProcRegistry("unused")
    registry.dir = blocked / "records"  # its folder cannot be made
    registry._groups = GroupLog(registry.dir)
    marker = f"hxrec{uuid.uuid4().hex[:8]}"
    with pytest.raises(OSError):
        run_group(["/bin/sh", "-c", f"sleep 60 # {marker}"], cwd=str(tmp_path), env=clean_env(str(tmp_path)),
                  timeout=30, output_limit=1000, live=_Recorded(registry))
    # killed with its group: the shell is reaped; a child it forked may take a moment under load to die
    # (the full suite at load ~40 saw it still there right after the kill), but it must go, not sleep on
    assert all(_gone(pid) for pid in _marked(marker)), _marked(marker)
