"""Run one command as a process group with a timeout, bounded output, and no inherited environment."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence

from hermes_exp.sandbox.base import SPOOL_LIMIT, TRUNCATION_MARKER, ExecResult, truncate
from hermes_exp.sandbox.spawn import Actions, Child, spawn, usable

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
    spool_limit: int = SPOOL_LIMIT,
    reuse: Spool | None = None,
) -> ExecResult:
    """Run `argv` in its own session; on timeout kill the whole group. Output goes through a temp
    file, so a flood of output costs no memory and never deadlocks a pipe; past `spool_limit` bytes
    the command is killed, so it costs no more than that on disk either. `reuse`: the sandbox's
    output file, emptied and used again (with `cwd`, which must be its working directory)."""
    if preexec is not None:
        reuse = None  # Popen's start: nothing of posix_spawn's to reuse
    used = True  # whether the file may hold output (unknown until it is read)
    if reuse is not None:
        out, actions = reuse.take()
    else:
        out, actions = spool(), None  # a descriptor, read once in preads: no file object or buffer per command
    try:
        proc = _start(argv, cwd, env, out, actions, preexec)
        stop = _watched(proc, out, timeout, spool_limit, live)
        text, truncated = read_spool(out, output_limit)
        used = text != ""
    finally:
        if reuse is not None:
            reuse.give(out, actions, used)
        else:
            os.close(out)
    return _result(proc.returncode, text, truncated, stop, timeout, spool_limit)


def _start(argv: Sequence[str], cwd: str | None, env: dict[str, str], out: int, actions: object,
           preexec: Callable[[], None] | None) -> Child | subprocess.Popen:
    """posix_spawn where it can (Popen's fork + exec costs more), Popen when a preexec is needed."""
    if preexec is None:
        return spawn(argv, cwd=cwd, env=env, out=out, actions=actions)
    return subprocess.Popen(
        list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
        start_new_session=True, preexec_fn=preexec, close_fds=True,
    )


def _watched(proc: Child | subprocess.Popen, out: int, timeout: float, spool_limit: int,
             live: set[int] | None) -> str | None:
    """Wait for the command (see _wait), then kill whatever is left of its group, always."""
    try:
        if live is not None:
            live.add(proc.pid)  # so closing the sandbox from another thread can kill the group
        return _wait(proc, out, timeout, spool_limit)
    finally:
        kill_group(proc.pid)
        proc.wait()
        if live is not None:
            live.discard(proc.pid)


def _result(returncode: int, text: str, truncated: bool, stop: str | None, timeout: float,
            spool_limit: int) -> ExecResult:
    timed_out = stop == "timeout"
    if timed_out:
        text += f"\n[command timed out after {timeout:g}s; its process group was killed]"
    elif stop == "spool":
        text += f"\n[command killed: it printed more than {spool_limit >> 20} MB of output]"
        truncated = True
    return ExecResult(exit_code=124 if timed_out else returncode, output=text, timed_out=timed_out,
                      truncated=truncated)


WATCH_INTERVAL = 0.05  # seconds between looks at the size of a running command's output


def _wait(proc: Child | subprocess.Popen, spool: int, timeout: float, spool_limit: int) -> str | None:
    """Wait for the command to end: None, or why it must be stopped ("timeout", "spool": its output
    passed `spool_limit` bytes). Sleeps on the process's pidfd, waking when it exits (not reaped: its
    pid cannot be reused before the caller kills the group) or every WATCH_INTERVAL to look at the
    spool's size; where there is no pidfd, polls like Popen.wait(timeout) does."""
    deadline = time.monotonic() + timeout
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux >= 5.3
        return _poll_wait(proc, spool, deadline, spool_limit)
    try:
        exited = select.poll()
        exited.register(pidfd, select.POLLIN)
        while not exited.poll(1000 * min(WATCH_INTERVAL, max(deadline - time.monotonic(), 0.0))):
            if time.monotonic() >= deadline:
                return "timeout"
            if os.fstat(spool).st_size > spool_limit:
                return "spool"
    finally:
        os.close(pidfd)
    return None


def _poll_wait(proc: Child | subprocess.Popen, spool: int, deadline: float, spool_limit: int) -> str | None:
    delay = 0.0005
    while proc.poll() is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout"
        if os.fstat(spool).st_size > spool_limit:
            return "spool"
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.05)
    return None


def kill_group(pid: int) -> None:
    """Kill every process of the group led by `pid` (background children included)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def spool() -> int:
    """A new file for a command's output, unlinked from the start, as a descriptor: what
    tempfile.TemporaryFile opens (an O_TMPFILE in the temp dir, 0600), without its file object."""
    try:
        return os.open(tempfile.gettempdir(), os.O_RDWR | os.O_TMPFILE | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except (AttributeError, OSError):  # no O_TMPFILE here (not Linux, a file system without it)
        with tempfile.TemporaryFile(buffering=0) as fh:
            return os.dup(fh.fileno())


class Spool:
    """A sandbox's output file, used by each of its commands in turn: emptied before the next command instead
    of a new file (an ext4 inode, ~0.1-0.4 ms of the runner's CPU with many sessions) created and freed per
    command; with the posix_spawn file actions made for it, which the next command reuses too. A command
    that starts while another one holds it gets a file of its own. close() with the sandbox."""

    def __init__(self, cwd: str) -> None:
        self._cwd = cwd
        self._idle: tuple[int, Actions | None, bool] | None = None
        self._lock = threading.Lock()
        self._closed = False

    def take(self) -> tuple[int, Actions | None]:
        with self._lock:
            idle, self._idle = self._idle, None
        if idle is not None:
            out, actions, used = idle
            if not used:
                return out, actions
            try:  # emptied now, not when the last command gave it back: the sandbox's last one never is
                os.ftruncate(out, 0)
                os.lseek(out, 0, os.SEEK_SET)  # the offset the next command's stdout and stderr share
                return out, actions
            except OSError:
                _close(out, actions)
        out = spool()
        try:
            return out, Actions(out, self._cwd) if usable() else None
        except BaseException:
            os.close(out)
            raise

    def give(self, out: int, actions: Actions | None, used: bool = True) -> None:
        """A command's file back, once the command and its group are gone; `used`: unless it is known to
        be empty (then nothing needs emptying)."""
        with self._lock:
            if self._idle is None and not self._closed:
                self._idle = (out, actions, used)
                return
        _close(out, actions)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, None
        if idle is not None:
            _close(idle[0], idle[1])


def _close(out: int, actions: Actions | None) -> None:
    if actions is not None:
        actions.close()
    os.close(out)


FIRST_READ = 1 << 16  # bytes of a command's output read before asking its size (most output is smaller)


def read_spool(fd: int, limit: int) -> tuple[str, bool]:
    """read_bounded for a descriptor, in preads: a first read of what fits whole, the size asked for only
    when it did not (one syscall less for most commands' output)."""
    first = min(limit * 4, FIRST_READ)
    data = os.pread(fd, first + 1, 0)
    if len(data) <= first:
        return truncate(data.decode("utf-8", "replace"), limit)
    return _head_tail(os.fstat(fd).st_size, lambda n, at: os.pread(fd, n, at), limit)


def read_bounded(fh, limit: int) -> tuple[str, bool]:
    """Read the head and tail of a file of any size, within `limit` characters."""
    def read_at(n: int, at: int) -> bytes:
        fh.seek(at)
        return fh.read(n)

    return _head_tail(fh.seek(0, os.SEEK_END), read_at, limit)


def _head_tail(size: int, read_at: Callable[[int, int], bytes], limit: int) -> tuple[str, bool]:
    if size <= limit * 4:
        return truncate(read_at(size, 0).decode("utf-8", "replace"), limit)
    head_n = limit * 2 // 3
    head = read_at(head_n, 0).decode("utf-8", "replace")
    tail = read_at(limit - head_n, size - (limit - head_n)).decode("utf-8", "replace")
    return head + TRUNCATION_MARKER.format(dropped=size - head_n - (limit - head_n)) + tail, True
