"""Run one command as a process group with a timeout, bounded output, and no inherited environment."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from collections.abc import Callable, Sequence

from hermes_exp.sandbox.base import TRUNCATION_MARKER, ExecResult, truncate

SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def clean_env(home: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The whole environment a tool command sees: nothing of the runner's (API keys above all)."""
    env = {"PATH": SAFE_PATH, "HOME": home, "LANG": "C.UTF-8", "TERM": "dumb", "PWD": home}
    env.update({str(k): str(v) for k, v in (extra or {}).items()})
    return env


def run_group(
    argv: Sequence[str],
    *,
    cwd: str | None,
    env: dict[str, str],
    timeout: float,
    output_limit: int,
    preexec: Callable[[], None] | None = None,
    live: set[int] | None = None,
) -> ExecResult:
    """Run `argv` in its own session; on timeout kill the whole group. Output goes through a temp
    file, so a command that prints gigabytes costs disk, not memory, and never deadlocks a pipe."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=preexec, close_fds=True,
        )
        timed_out = False
        if live is not None:
            live.add(proc.pid)  # so closing the sandbox from another thread can kill the group
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            kill_group(proc.pid)
            proc.wait()
            if live is not None:
                live.discard(proc.pid)
        text, truncated = read_bounded(out, output_limit)
    code = proc.returncode if not timed_out else 124
    if timed_out:
        text += f"\n[command timed out after {timeout:g}s; its process group was killed]"
    return ExecResult(exit_code=code, output=text, timed_out=timed_out, truncated=truncated)


def kill_group(pid: int) -> None:
    """Kill every process of the group led by `pid` (background children included)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def read_bounded(fh, limit: int) -> tuple[str, bool]:
    """Read the head and tail of a file of any size, within `limit` characters."""
    size = fh.seek(0, os.SEEK_END)
    fh.seek(0)
    if size <= limit * 4:
        return truncate(fh.read().decode("utf-8", "replace"), limit)
    head_n = limit * 2 // 3
    head = fh.read(head_n).decode("utf-8", "replace")
    fh.seek(size - (limit - head_n))
    tail = fh.read().decode("utf-8", "replace")
    return head + TRUNCATION_MARKER.format(dropped=size - head_n - (limit - head_n)) + tail, True
