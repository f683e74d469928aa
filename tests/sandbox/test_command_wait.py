"""How run_group waits for a command (sandbox/process.py): on the process's pidfd, and by polling where
there is none; both end a command at its deadline and once its output passes the spool limit, with
real processes writing to a real spool file."""

from __future__ import annotations

import subprocess
import tempfile
import time

import pytest

from hermes_exp.sandbox.process import _poll_wait, _wait, kill_group


def _started(command: str, spool) -> subprocess.Popen:
    return subprocess.Popen(["/bin/sh", "-c", command], stdout=spool, stderr=subprocess.STDOUT, start_new_session=True)


@pytest.mark.parametrize("wait", [_wait, lambda proc, fd, timeout, limit: _poll_wait(proc, fd, time.monotonic() + timeout, limit)],
                         ids=["pidfd", "polling"])
@pytest.mark.parametrize("command,timeout,limit,stop", [
    ("echo done", 10, 1 << 20, None), ("sleep 5", 0.3, 1 << 20, "timeout"), ("yes", 10, 1 << 20, "spool")])
def test_a_command_ends_or_is_stopped_for_its_deadline_or_its_output(wait, command, timeout, limit, stop) -> None:
    with tempfile.TemporaryFile() as spool:
        proc = _started(command, spool)
        try:
            started = time.monotonic()
            assert wait(proc, spool.fileno(), timeout, limit) == stop
            assert time.monotonic() - started < 5
        finally:
            kill_group(proc.pid)  # `sh -c yes` forks: killing the shell alone left `yes` filling the disk
            proc.wait()


def test_the_pidfd_wait_leaves_the_exited_command_unreaped_so_its_pid_stays_its_own() -> None:
    with tempfile.TemporaryFile() as spool:
        proc = _started("exit 3", spool)
        assert _wait(proc, spool.fileno(), 10, 1 << 20) is None
        assert proc.returncode is None  # a zombie until the caller has killed its group and reaps it
        assert proc.wait() == 3
