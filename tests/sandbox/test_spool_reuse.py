"""A sandbox's commands share one output file (sandbox/process.py Spool): emptied after each command, so the
next one sees none of the last one's output, never shared by two commands at once, closed with the sandbox
(the spool read past its first 64 KiB: tests/sandbox/test_spool.py)."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from hermes_exp.sandbox.process import read_spool, spool

# the command's stdout: which file (inode), how many names it has, where the shared offset starts
WHICH = "grep pos /proc/$$/fdinfo/1; stat -L -c '%i %h' /proc/self/fd/1"


def _file(sandbox: Any) -> tuple[str, str]:
    lines = sandbox.exec(WHICH, timeout=30).output.splitlines()
    return lines[1], lines[0].split()[1]


@pytest.mark.parametrize("backend", ["local", pytest.param("bwrap", marks=pytest.mark.bwrap)], indirect=True)
def test_a_sandboxs_commands_reuse_one_emptied_output_file(sandbox: Any) -> None:
    first, at = _file(sandbox)
    assert first.split()[1] == "0" and at == "0"  # unlinked, written from its start
    long = sandbox.exec("seq 1 5000", timeout=30)
    assert long.output.splitlines()[-1] == "5000"
    again, at = _file(sandbox)
    assert again == first and at == "0"  # the same file, its offset back at the start
    short = sandbox.exec("echo short", timeout=30)
    assert short.output == "short\n"  # nothing of the longer output before it, no hole of NULs
    timed_out = sandbox.exec("echo before; sleep 30", timeout=0.5)
    assert timed_out.timed_out and timed_out.output.startswith("before\n")
    assert sandbox.exec("echo after", timeout=30).output == "after\n"


@pytest.mark.parametrize("backend", ["local"], indirect=True)
def test_commands_at_once_in_one_sandbox_get_files_of_their_own(sandbox: Any) -> None:
    outputs: dict[str, str] = {}
    slow = threading.Thread(target=lambda: outputs.update(slow=sandbox.exec(
        f"{WHICH}; sleep 1; echo slow-done", timeout=30).output))
    slow.start()
    try:
        quick = sandbox.exec(f"{WHICH}; echo quick-done", timeout=30).output
    finally:
        slow.join()
    assert outputs["slow"].splitlines()[1] != quick.splitlines()[1]  # two files
    assert outputs["slow"].endswith("slow-done\n") and "quick" not in outputs["slow"]
    assert quick.endswith("quick-done\n") and "slow" not in quick


@pytest.mark.parametrize("backend", ["local"], indirect=True)
def test_the_output_file_is_closed_with_its_sandbox(open_sandbox: Any) -> None:
    sandbox = open_sandbox()
    sandbox.exec("echo one", timeout=30)
    inode = sandbox.exec("stat -L -c %i /proc/self/fd/1", timeout=30).output.strip()
    assert inode in _open_inodes()
    sandbox.close()
    assert inode not in _open_inodes()


def _open_inodes() -> set[str]:
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.add(str(os.stat(f"/proc/self/fd/{fd}").st_ino))
        except OSError:  # the directory's own descriptor, gone
            pass
    return found
