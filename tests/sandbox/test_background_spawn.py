"""A background command (sandbox/background.py) is started through posix_spawn where spawn.py can, with a
pipe for its stdin, and cannot tell it from Popen's start: the same descriptors, stdin a pipe it reads,
its own session, the working directory and environment; its Child waits with a timeout as Popen does."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from hermes_exp.sandbox import spawn as spawn_mod
from hermes_exp.sandbox.background import HostBackground
from hermes_exp.sandbox.process import clean_env

needs_libc = pytest.mark.skipif(spawn_mod._LIBC is None, reason="no glibc >= 2.34 posix_spawn file actions here")

PROPERTIES = r"""
echo /proc/$$/fd/*
readlink /proc/$$/fd/0 | cut -d: -f1
echo "$$ $(cut -d' ' -f6 /proc/$$/stat)"
pwd; env | sort | tr '\n' ' '; echo
grep -E '^Sig(Blk|Ign)' /proc/self/status | tr '\n' ' '; echo
read line; echo "got:$line"
"""


def _properties(tmp_path: Path, monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[str, str]:
    bg = HostBackground("proc_000000000001", ["/bin/sh", "-c", PROPERTIES], "props", cwd=str(tmp_path),
                        env=clean_env(str(tmp_path), {"EXTRA": "1"}), live=set())
    try:
        kind = type(bg._proc).__name__
        bg.write(b"hello\n")
        deadline = time.monotonic() + 30
        while bg.exit_code() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert bg.exit_code() == 0
        text = os.pread(bg.log.file.fileno(), 1 << 16, 0).decode()
    finally:
        bg.kill()
        bg.log.close()
    pid, sid = re.search(r"^(\d+) (\d+)$", text, re.M).groups()
    assert pid == sid  # the leader of its own session
    return kind, text.replace(pid, "PID")


@needs_libc
def test_a_background_command_started_by_posix_spawn_is_as_popens(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    kind, spawned = _properties(tmp_path)
    monkeypatch.setattr(spawn_mod, "_LIBC", None)
    popen_kind, popened = _properties(tmp_path)
    assert (kind, popen_kind) == ("Child", "Popen")
    assert spawned == popened  # descriptors, stdin, session, directory, environment, signals
    lines = spawned.splitlines()
    assert lines[0].split()[:3] == ["/proc/PID/fd/0", "/proc/PID/fd/1", "/proc/PID/fd/2"]  # (3: the glob's)
    assert len(lines[0].split()) == 4
    assert lines[1] == "pipe" and lines[-1] == "got:hello"


@needs_libc
def test_a_childs_wait_times_out_as_popens(tmp_path: Path) -> None:
    out = os.open(os.devnull, os.O_WRONLY)
    try:
        child = spawn_mod.posix_spawn(["/bin/sleep", "30"], cwd=str(tmp_path), env={}, out=out)
    finally:
        os.close(out)
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(timeout=0.1)
    os.kill(child.pid, 9)
    assert child.wait(timeout=30) == -9 and child.poll() == -9


def test_a_childs_exit_code_is_the_same_seen_from_many_threads(tmp_path: Path) -> None:
    # the flood guard's thread polls a background command while the agent's thread waits for it: a second
    # waitpid at once would find no child and take the exit code for 0
    out = os.open(os.devnull, os.O_WRONLY)
    try:
        children = [spawn_mod.posix_spawn(["/bin/sh", "-c", "exit 3"], cwd=str(tmp_path), env={}, out=out)
                    for _ in range(50)]
    finally:
        os.close(out)
    seen: list[int | None] = []

    def poll(child: spawn_mod.Child) -> None:
        while (code := child.poll()) is None:
            pass
        seen.append(code)

    for child in children:
        threads = [threading.Thread(target=poll, args=(child,)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert seen == [3] * 200


def test_a_host_background_command_is_waited_for_until_it_ends(tmp_path: Path) -> None:
    bg = HostBackground("proc_000000000001", ["/bin/sh", "-c", "sleep 0.2; exit 4"], "sleep", cwd=str(tmp_path),
                        env=clean_env(str(tmp_path)), live=set())
    long = HostBackground("proc_000000000002", ["/bin/sh", "-c", "sleep 30"], "sleep", cwd=str(tmp_path),
                          env=clean_env(str(tmp_path)), live=set())
    try:
        assert bg.wait_ended(30) and bg.exit_code() == 4
        assert bg.wait_ended(0) and bg.wait_ended(1)  # ended stays ended
        assert not long.wait_ended(0.2) and long.exit_code() is None
    finally:
        for proc in (bg, long):
            proc.kill()
            proc.log.close()
