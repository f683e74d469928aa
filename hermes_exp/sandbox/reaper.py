"""Processes of a run that must not outlive it: tool commands in their own sessions (sandbox=local) and
executor worker processes. Each is recorded in a per-run directory while it lives, so whatever a killed
runner left is killed by the run's watchdog (a small process that outlives a SIGKILLed runner) or by the
next invocation of the same run. A record tells the process from one that reused its pid: a worker's
file holds its start time, a command's line in its process's log (grouplog.py) a time it had started by."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from hermes_exp.sandbox import grouplog

GROUP, PROCESS = "group", "pid"
STOPPED = "stopped"  # written by the runner at its shutdown: its workers' sandbox factories stop starting
CLAIM = "invocation"  # `invocation-<runner pid>`: a runner's watchdog holds the folder (see Watchdog)


def registry_dir(run_id: str) -> Path:
    return Path(tempfile.gettempdir()) / "hermes-exp-procs" / run_id


def _stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, session, ...)."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)  # once per tool command: no pathlib
        try:
            data = os.read(fd, 4096)
        finally:
            os.close(fd)
        return data.decode("utf-8", "replace").rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or None."""
    fields = _stat(pid)
    return fields[19] if fields else None


_MTIME_SLACK = 0.02  # seconds: see stopped_since


def mark_stopped(run_id: str) -> None:
    """Tell this run's executor workers that the runner is shutting down (a no-op without its watchdog's
    directory: nothing else runs then). Written before the shutdown reap, so whatever a worker starts
    later, or has in flight, is seen by the reap or finds the mark when it comes back (`stopped_since`)."""
    try:
        (registry_dir(run_id) / STOPPED).touch()
    except OSError:
        pass


def stopped_since(run_id: str, since: float) -> bool:
    """Whether the runner marked the run stopped at or after `since` (a time.time(); an earlier
    invocation's mark is older than the factory asking). A file's mtime comes from the kernel's coarse
    clock, up to a tick (1-10 ms) behind time.time(): a mark made just after `since` can read as before
    it, hence the slack; an earlier invocation's mark is older by its whole shutdown and this start-up."""
    try:
        return (registry_dir(run_id) / STOPPED).stat().st_mtime >= since - _MTIME_SLACK
    except OSError:
        return False


def _session_members(sid: int, since: int) -> list[int]:
    """Processes of session `sid` started no earlier than its (now gone) leader."""
    members = []
    for entry in Path("/proc").iterdir():
        fields = _stat(entry.name) if entry.name.isdigit() else None
        if fields and fields[3] == str(sid) and int(fields[19]) >= since:
            members.append(int(entry.name))
    return members


def _kill(kind: str, pid: int, recorded: str) -> bool:
    """Kill a recorded process, or a recorded group (whose leader may be gone while members live)."""
    now = start_time(pid)
    if now == recorded:
        targets = [(os.killpg if kind == GROUP else os.kill, pid)]
    elif now is None and kind == GROUP and recorded.isdigit():  # never when the pid was recycled
        targets = [(os.kill, member) for member in _session_members(pid, int(recorded))]
    else:
        return False
    return _signal(targets)


def _kill_started_by(pid: int, ticks: int) -> bool:
    """Kill the group of a command a log records as started by `ticks` (or, its leader gone, its session's
    members): a process that has the pid and started later reused it, and is left alone."""
    now = start_time(pid)
    if now is not None:
        if int(now) > ticks:
            return False
        targets = [(os.killpg, pid)]
    else:
        targets = [(os.kill, member) for member in _session_members(pid, 0)]
    return _signal(targets)


def _signal(targets: list[tuple[Callable[[int, int], None], int]]) -> bool:
    for kill, target in targets:
        try:
            kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return bool(targets)


class ProcRegistry:
    """Records in `registry_dir(run_id)`: tool commands' process groups in this process's log
    (grouplog.py), other processes (executor workers) as a file `pid-<pid>` holding the start time."""

    def __init__(self, run_id: str) -> None:
        self.dir = registry_dir(run_id)
        self._made = False
        self._groups = grouplog.GroupLog(self.dir)

    def add(self, pid: int, kind: str = GROUP) -> None:
        if kind == GROUP:
            self._groups.add(pid)
            return
        started = start_time(pid)
        if started is None:
            return  # already gone
        if not self._made:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._made = True
        fd = os.open(f"{self.dir}/{kind}-{pid}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, started.encode())
        finally:
            os.close(fd)

    def discard(self, pid: int, kind: str = GROUP) -> None:
        if kind == GROUP:
            self._groups.discard(pid)
            return
        try:
            os.unlink(f"{self.dir}/{kind}-{pid}")
        except FileNotFoundError:
            pass

    def reap(self, kinds: tuple[str, ...] = (GROUP, PROCESS)) -> int:
        """Kill every recorded process (group) of these kinds that still runs; return how many."""
        return reap(self.dir, kinds)

    def close(self) -> None:
        """Remove this process's log if it records nothing running."""
        self._groups.close()


def reap(where: Path, kinds: tuple[str, ...] = (GROUP, PROCESS)) -> int:
    """Kill what the records in `where` name (if still the same process) and drop the records: workers
    first, then (once those are gone, their logs with them) the commands' logs."""
    try:
        entries = sorted(where.iterdir(), key=lambda entry: entry.name.startswith(grouplog.PREFIX))
    except OSError:
        return 0
    killed, workers = 0, []
    for entry in entries:
        if entry.name.startswith(grouplog.PREFIX):
            if GROUP in kinds:
                _await_exit(workers)
                workers = []
                killed += grouplog.reap_log(entry, _kill_started_by)
            continue
        kind, _, pid_text = entry.name.partition("-")
        if kind not in kinds or not pid_text.isdigit() or int(pid_text) == os.getpid():
            continue
        pid = int(pid_text)
        try:
            recorded = entry.read_text().strip()
        except OSError:
            continue
        if recorded and _kill(kind, pid, recorded):
            killed += 1
            if kind == PROCESS:
                workers.append(pid)
        entry.unlink(missing_ok=True)
    return killed


def _await_exit(pids: list[int], seconds: float = 2.0) -> None:
    """Wait (bounded) for killed processes to be gone: their logs' locks go with them."""
    deadline = time.monotonic() + seconds
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):  # gone already, or no pidfd here
            continue
        try:
            select.select([fd], [], [], max(deadline - time.monotonic(), 0.0))
        finally:
            os.close(fd)


def die_with_parent(parent: int, on_death: Callable[[], object]) -> None:
    """Make this executor worker end when the runner `parent` dies (SIGKILL leaves workers orphaned):
    a thread watches the parent pid, runs `on_death` (kill the run's recorded commands), and exits.
    A watch rather than PR_SET_PDEATHSIG: that signal follows the parent *thread* that started the
    worker, which is not the runner's lifetime."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        try:
            on_death()
            grouplog.close_all()  # os._exit runs no clean-up: this process's logs go now
        finally:
            os._exit(1)

    threading.Thread(target=watch, name="hx-parent-watch", daemon=True).start()


class Watchdog:
    """Kills what an earlier invocation of the run left, then starts a process in its own session that
    waits for this runner to end (its stdin closes, however the runner died) and kills every process
    the run recorded. On a normal end the runner first drops its workers' records: an idle executor
    worker may serve the next job of a sweep.

    The folder holds this invocation's claim file while it runs: an earlier invocation's worker or
    watchdog, exiting late, removes the folder only if empty (rmdir), so it cannot take this one's
    (whose stop mark, `mark_stopped`, would then be lost) between its start and its first record."""

    def __init__(self, run_id: str) -> None:
        self.dir = registry_dir(run_id)
        self._proc: subprocess.Popen | None = None

    def __enter__(self) -> "Watchdog":
        reap(self.dir)
        claim = _claim(self.dir)
        self._proc = subprocess.Popen([sys.executable, "-m", "hermes_exp.sandbox.reaper", str(self.dir), claim.name],
                                      stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True,
                                      close_fds=True)
        return self

    def __exit__(self, *exc: object) -> None:
        for record in self.dir.glob(f"{PROCESS}-*"):
            record.unlink(missing_ok=True)
        if self._proc is not None:
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()


def _claim(where: Path) -> Path:
    """Make the folder with this invocation's claim file in it. An earlier invocation's process may
    remove the folder (empty) between the two steps: then the file cannot be made, and both are again.
    Other claims are earlier invocations' (runlock.py: one at a time), left by a killed watchdog."""
    claim = where / f"{CLAIM}-{os.getpid()}"
    while True:
        where.mkdir(parents=True, exist_ok=True)
        try:
            claim.touch()
            break
        except FileNotFoundError:
            continue
    for other in where.glob(f"{CLAIM}-*"):
        if other != claim:
            other.unlink(missing_ok=True)
    return claim


def _watch(where: Path, claim: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C to the runner's terminal is not for us
    sys.stdin.buffer.read()  # returns when every writer is gone: the runner ended, or was killed
    reap(where)
    try:
        (where / claim).unlink(missing_ok=True)
        if any(where.glob(f"{CLAIM}-*")):  # a later invocation's (this runner was killed): its stop mark
            return
        (where / STOPPED).unlink(missing_ok=True)
        where.rmdir()
    except OSError:
        pass


if __name__ == "__main__":
    _watch(Path(sys.argv[1]), sys.argv[2])
