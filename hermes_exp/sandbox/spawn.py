"""Start a tool command as run_group needs it, with glibc's posix_spawn: what subprocess.Popen(argv, cwd=...,
env=..., stdin=DEVNULL, stdout=out, stderr=STDOUT, start_new_session=True, close_fds=True) does, for a
fraction of its per-call Python (~0.2 ms of the runner's CPU per command, most of a tool call's cost).

The child gets: stdin /dev/null, stdout and stderr the output file, no other descriptor (closefrom 3), its
own session and process group (setsid), the working directory `cwd`, exactly `env`, SIGPIPE and SIGXFSZ back
at their defaults (Python ignores SIGPIPE; Popen's restore_signals does the same), the caller's signal mask,
umask and rlimits. Python's os.posix_spawn has no chdir or closefrom action before 3.13, so the C library's
own is called through ctypes: posix_spawn_file_actions_addchdir_np (glibc >= 2.29) and
posix_spawn_file_actions_addclosefrom_np (>= 2.34). Where either is missing, or the executable is not a
path, Popen does it as before."""

from __future__ import annotations

import ctypes
import io
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Sequence

_SETSID, _SETSIGDEF = 0x80, 0x04  # glibc's <spawn.h>: POSIX_SPAWN_SETSID, POSIX_SPAWN_SETSIGDEF
_ACTIONS_SIZE, _ATTR_SIZE, _SIGSET_SIZE = 512, 1024, 128  # glibc's: 80, 336 and 128 bytes
_DEVNULL = b"/dev/null"


class Child:
    """A started command, as much of Popen as run_group and its waits use: pid, returncode, poll, wait
    (returncode as Popen has it: the exit status, or -N for signal N). Thread-safe as Popen is: a background
    command is polled by its flood guard's thread and waited for by the agent's."""

    __slots__ = ("pid", "returncode", "stdin", "_lock")

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.stdin: io.FileIO | None = None  # a background command's (background.py sets it)
        self._lock = threading.Lock()  # one waitpid at a time: a second one would find no child (ECHILD)

    def poll(self) -> int | None:
        return self._reap(os.WNOHANG)

    def wait(self, timeout: float | None = None) -> int:
        """Popen.wait: the exit code; subprocess.TimeoutExpired after `timeout` seconds (on a pidfd)."""
        if timeout is not None and self.poll() is None:
            deadline = time.monotonic() + timeout
            try:
                pidfd = os.pidfd_open(self.pid)
            except OSError:  # reaped elsewhere, or no pidfds (Linux < 5.3): polled as Popen does
                while self.poll() is None:
                    if time.monotonic() >= deadline:
                        raise subprocess.TimeoutExpired("posix_spawn", timeout) from None
                    time.sleep(0.005)
            else:
                try:
                    exited = select.poll()
                    exited.register(pidfd, select.POLLIN)
                    if not exited.poll(max(timeout, 0.0) * 1000):
                        raise subprocess.TimeoutExpired("posix_spawn", timeout)
                finally:
                    os.close(pidfd)
        code = self._reap(0)
        assert code is not None
        return code

    def _reap(self, flags: int) -> int | None:
        if self.returncode is None:
            with self._lock:
                if self.returncode is None:
                    try:
                        pid, status = os.waitpid(self.pid, flags)
                    except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored): Popen says 0 too
                        self.returncode = 0
                    else:
                        if pid:
                            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def _libc() -> ctypes.CDLL | None:
    """The C library with the posix_spawn calls this needs, their argument types set; None without them."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fns = {"posix_spawn": [ctypes.POINTER(ctypes.c_int), ctypes.c_char_p] + [ctypes.c_void_p] * 4,
               "posix_spawn_file_actions_init": [ctypes.c_void_p],
               "posix_spawn_file_actions_destroy": [ctypes.c_void_p],
               "posix_spawn_file_actions_adddup2": [ctypes.c_void_p, ctypes.c_int, ctypes.c_int],
               "posix_spawn_file_actions_addopen": [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                                                    ctypes.c_uint],
               "posix_spawn_file_actions_addchdir_np": [ctypes.c_void_p, ctypes.c_char_p],
               "posix_spawn_file_actions_addclosefrom_np": [ctypes.c_void_p, ctypes.c_int],
               "posix_spawnattr_init": [ctypes.c_void_p], "posix_spawnattr_setflags": [ctypes.c_void_p, ctypes.c_short],
               "posix_spawnattr_setsigdefault": [ctypes.c_void_p, ctypes.c_void_p]}
        for name, argtypes in fns.items():
            fn = getattr(libc, name)
            fn.argtypes, fn.restype = argtypes, ctypes.c_int
        return libc
    except (OSError, AttributeError):  # not glibc, or one older than 2.34
        return None


def _attributes(libc: ctypes.CDLL) -> ctypes.Array:
    """The spawn attributes every command shares (read-only after this): setsid, and these signals back at
    their defaults: SIGPIPE and SIGXFSZ (as Popen's restore_signals), and the C library's own two (32 and
    33 on glibc, below SIGRTMIN), which glibc's posix_spawn would leave ignored in the child where Popen's
    exec leaves them at their defaults. sigaddset refuses those two, so the set's bits are set directly
    (a sigset_t is an array of unsigned longs, signal N at bit N - 1)."""
    attr = ctypes.create_string_buffer(_ATTR_SIZE)
    bits = 8 * ctypes.sizeof(ctypes.c_ulong)
    defaults = (ctypes.c_ulong * (_SIGSET_SIZE // ctypes.sizeof(ctypes.c_ulong)))()
    for sig in (signal.SIGPIPE, signal.SIGXFSZ, *range(32, signal.SIGRTMIN)):
        defaults[(sig - 1) // bits] |= 1 << ((sig - 1) % bits)
    if (libc.posix_spawnattr_init(attr) or libc.posix_spawnattr_setsigdefault(attr, defaults)
            or libc.posix_spawnattr_setflags(attr, _SETSID | _SETSIGDEF)):
        raise OSError("posix_spawnattr refused the attributes")
    return attr


def _setup() -> tuple[ctypes.CDLL | None, ctypes.Array | None]:
    libc = _libc()
    try:
        return (libc, _attributes(libc)) if libc is not None else (None, None)
    except OSError:
        return None, None


_LIBC, _ATTR = _setup()


def _strings(items: list[bytes]) -> ctypes.Array:
    """A NULL-terminated char* array, refusing NUL inside an item as Popen does."""
    for item in items:
        if b"\0" in item:
            raise ValueError("embedded null byte")
    return (ctypes.c_char_p * (len(items) + 1))(*items, None)


def _environ(env: dict[str, str]) -> list[bytes]:
    pairs = []
    for key, value in env.items():
        name = os.fsencode(key)
        if b"=" in name:
            raise ValueError("illegal environment variable name")
        pairs.append(name + b"=" + os.fsencode(value))
    return pairs


def usable() -> bool:
    """Whether this C library has what posix_spawn() needs (else spawn() uses Popen)."""
    return _LIBC is not None


def spawn(argv: Sequence[str], *, cwd: str | None, env: dict[str, str], out: int,
          actions: Actions | None = None) -> Child | subprocess.Popen:
    """Start `argv` with its output to the descriptor `out` (see the module's docstring). `actions`: the
    file actions made for this `out` and `cwd` (Actions) by a caller that starts many commands so."""
    if _LIBC is None or "/" not in str(argv[0]):
        return popen(argv, cwd=cwd, env=env, out=out)
    return posix_spawn(argv, cwd=cwd, env=env, out=out, actions=actions)


def popen(argv: Sequence[str], *, cwd: str | None, env: dict[str, str], out: int) -> subprocess.Popen:
    return subprocess.Popen(list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                            stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)


class Actions:
    """posix_spawn's file actions for one output descriptor, working directory and stdin, made once and
    reused by every command started with them (posix_spawn only reads them): eight calls into the C
    library, each a release of the GIL, saved per command. close() frees them."""

    __slots__ = ("buffer",)

    def __init__(self, out: int, cwd: str | None, stdin: int | None = None) -> None:
        libc = _LIBC
        assert libc is not None
        where = os.fsencode(cwd) if cwd is not None else None
        if where is not None and b"\0" in where:
            raise ValueError("embedded null byte")
        self.buffer: ctypes.Array | None = ctypes.create_string_buffer(_ACTIONS_SIZE)
        libc.posix_spawn_file_actions_init(self.buffer)
        # in this order: `out` may itself be 0 (a runner started with stdin closed); /dev/null read-write
        # as Popen's DEVNULL opens it; a stdin pipe's end is above 2 (the caller sees to it)
        err = (libc.posix_spawn_file_actions_adddup2(self.buffer, out, 1)
               or libc.posix_spawn_file_actions_adddup2(self.buffer, out, 2)
               or (libc.posix_spawn_file_actions_addopen(self.buffer, 0, _DEVNULL, os.O_RDWR, 0) if stdin is None
                   else libc.posix_spawn_file_actions_adddup2(self.buffer, stdin, 0))
               or (where is not None and libc.posix_spawn_file_actions_addchdir_np(self.buffer, where))
               or libc.posix_spawn_file_actions_addclosefrom_np(self.buffer, 3))
        if err:  # a bad descriptor, no memory
            self.close()
            raise OSError(err, os.strerror(err))

    def close(self) -> None:
        if self.buffer is not None and _LIBC is not None:
            _LIBC.posix_spawn_file_actions_destroy(self.buffer)
        self.buffer = None


def posix_spawn(argv: Sequence[str], *, cwd: str | None, env: dict[str, str], out: int,
                actions: Actions | None = None, stdin: int | None = None) -> Child:
    """spawn() through the C library (only where _LIBC is set); `actions` made for this `out` and `cwd`
    (and `stdin`: a descriptor above 2 for the command's stdin instead of /dev/null) or None."""
    libc = _LIBC
    assert libc is not None
    args = [os.fsencode(arg) for arg in argv]
    c_argv = _strings(args)
    c_env = _strings(_environ(env))
    own = actions is None
    if own:
        actions = Actions(out, cwd, stdin)
    try:
        pid = ctypes.c_int()
        err = libc.posix_spawn(ctypes.byref(pid), args[0], actions.buffer, _ATTR, c_argv, c_env)
    finally:
        if own:
            actions.close()
    if err:  # the child could not chdir or exec (glibc has reaped it): as Popen, name what was missing
        missing = cwd if cwd is not None and not os.path.isdir(cwd) else argv[0]
        raise OSError(err, os.strerror(err), missing)
    return Child(pid.value)


def background(argv: Sequence[str], *, cwd: str | None, env: dict[str, str], out: int) -> Child | subprocess.Popen:
    """Popen(argv, cwd=cwd, env=env, stdin=PIPE, stdout=out, stderr=STDOUT, start_new_session=True,
    close_fds=True, bufsize=0) for a background command: `.stdin` the pipe's unbuffered write end, through
    posix_spawn where spawn() would use it and no descriptor involved is one of 0-2 (then Popen, which sorts
    such descriptors out)."""
    read_end = write_end = -1
    if _LIBC is not None and "/" in str(argv[0]) and out >= 3:
        read_end, write_end = os.pipe()  # neither inherited; the child gets the read end as its stdin
    if read_end < 3:
        if write_end >= 0:
            os.close(read_end)
            os.close(write_end)
        return subprocess.Popen(list(argv), cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, close_fds=True, bufsize=0)
    try:
        child = posix_spawn(argv, cwd=cwd, env=env, out=out, stdin=read_end)
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    child.stdin = io.FileIO(write_end, "w")  # as Popen(bufsize=0) has it
    return child
