"""A run directory is written by one host at a time: an invocation on another host (a UTS namespace of its
own, with its own host name) is refused while the holder's heartbeat moves, and takes over once it stopped."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from hermes_exp.run.lock import RunLock


def _other_host(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """`hermes-exp ARGS` on "another host": same files, another host name (unshare -u)."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-u", "true"]).returncode != 0:
        pytest.skip("unshare -u (a UTS namespace, root) is not available here: no second host name to run as")
    script = f"hostname node-b && exec {sys.executable} -m hermes_exp.cli {' '.join(args)}"
    return subprocess.run(["unshare", "-u", "sh", "-c", script], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})


def test_a_second_host_is_refused_while_the_holder_beats(tmp_path: Path) -> None:
    run_dir = tmp_path / "outputs" / "held"
    with RunLock(run_dir):  # this process, on this host, holds the run and beats
        refused = _other_host(tmp_path, "run_name=held", "max_samples=1")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert f"in use by hermes-exp pid {os.getpid()} on host {socket.gethostname()}" in refused.stderr
    assert "written by one host at a time" in refused.stderr and "fix: wait for it to finish" in refused.stderr
    assert not (run_dir / "ledger.db").exists()


@pytest.mark.slow
def test_a_holder_whose_heartbeat_stopped_is_taken_over(tmp_path: Path) -> None:
    run_dir = tmp_path / "outputs" / "left"
    run_dir.mkdir(parents=True)
    (run_dir / ".lock").write_text("4242 crashed-node 17")  # a holder on a host that went away (no flock here)
    took = _other_host(tmp_path, "run_name=left", "max_samples=1", "sandbox=local", "distribution=terminal_only")
    assert took.returncode == 0, took.stderr
    assert "held by pid 4242 on host crashed-node, which stopped updating it" in took.stderr
    assert (run_dir / ".lock").read_text().strip() == ""  # released on exit: the next host need not wait
