"""Background processes of one sandbox (what the `process` tool drives): started by `spawn`, their
new output read, their stdin fed, killed on request, and killed with their sandbox whatever happens."""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from typing import IO, Protocol

from hermes_exp.errors import ToolError
from hermes_exp.sandbox.base import SPOOL_LIMIT, TRUNCATION_MARKER, truncate
from hermes_exp.sandbox import spawn
from hermes_exp.sandbox.process import kill_group

MAX_PER_SANDBOX = 16  # a model that starts a server per turn must not fork-bomb the host


class Background(Protocol):
    """One background command. `exit_code()` is None while it runs. write() and close_stdin() raise
    ToolError when its stdin is closed or it has exited; kill() is idempotent and never raises."""

    id: str
    command: str
    started: float
    log: "OutputLog"

    def exit_code(self) -> int | None: ...

    def write(self, data: bytes) -> None: ...

    def close_stdin(self) -> None: ...

    def kill(self) -> None: ...


class OutputLog:
    """A process's combined output in a temp file (disk, not memory), with a cursor for "new output".
    Reads use pread, so they never move the file offset a writing child process shares with us."""

    def __init__(self) -> None:
        # unbuffered: a host process writes the file itself and reads are preads, so a buffer (8 KB
        # per background process, for the sandbox's whole life) would serve only `append`
        self.file: IO[bytes] = tempfile.TemporaryFile(prefix="hx-bg-", buffering=0)
        self._cursor = 0
        self._lock = threading.Lock()

    def append(self, data: bytes) -> None:
        """For backends whose output arrives through a stream (docker); host processes write directly.
        Past SPOOL_LIMIT bytes the rest is dropped (the tool's poll says so)."""
        if not self.file.closed and not self.full():
            view = memoryview(data)
            while view:
                view = view[self.file.write(view):]

    def full(self) -> bool:
        return self._size() > SPOOL_LIMIT

    def _size(self) -> int:
        return os.fstat(self.file.fileno()).st_size if not self.file.closed else 0

    def read_new(self, limit: int) -> tuple[str, bool]:
        """What was written since the last call, head and tail kept within `limit` characters."""
        with self._lock:
            end = self._size()
            start, self._cursor = self._cursor, end
            return self._slice(start, end, limit)

    def tail_lines(self, offset: int | None, limit: int, max_chars: int) -> tuple[list[str], int]:
        """Lines [offset, offset+limit) of the output (default: the last `limit`), and how many there are
        (only the last 4 * max_chars characters are kept in view)."""
        with self._lock:
            end = self._size()
            text = self._read(max(0, end - max_chars * 4), end)
        lines = text.splitlines()
        first = max(0, len(lines) - limit) if offset is None else max(0, offset)
        return lines[first:first + limit], len(lines)

    def _read(self, start: int, end: int) -> str:
        if end <= start or self.file.closed:
            return ""
        return os.pread(self.file.fileno(), end - start, start).decode("utf-8", "replace")

    def _slice(self, start: int, end: int, limit: int) -> tuple[str, bool]:
        if end - start <= limit * 4:
            return truncate(self._read(start, end), limit)
        head_n = limit * 2 // 3
        head, tail = self._read(start, start + head_n), self._read(end - (limit - head_n), end)
        return head + TRUNCATION_MARKER.format(dropped=end - start - limit) + tail, True

    def close(self) -> None:
        self.file.close()


def session_id(number: int) -> str:
    """Ids count up per sandbox (proc_000000000001, ...): unique where they are used, and the same in every
    run, so a reproduced run's conversations match."""
    return f"proc_{number:012d}"


class HostBackground:
    """A command run as a host process group (local, or bwrap's launcher + bwrap): its whole group is
    killed, which for bwrap takes down the command's pid namespace with it."""

    def __init__(self, id_: str, argv: list[str], command: str, *, cwd: str, env: dict[str, str],
                 live: set[int]) -> None:
        self.id, self.command, self.started = id_, command, time.time()
        self.log = OutputLog()
        self._live = live
        # bufsize=0: stdin is written with os.write on its descriptor, so a buffered writer's 8 KiB
        # buffer would be held unused for the command's whole life (one per background command)
        # (posix_spawn where it can, as a command's start: ~0.1-0.3 ms of the runner's CPU less than Popen)
        try:
            self._proc = spawn.background(argv, cwd=cwd, env=env, out=self.log.file.fileno())
        except BaseException:
            self.log.close()
            raise
        os.set_blocking(self._proc.stdin.fileno(), False)  # a command that never reads must not hang us
        live.add(self._proc.pid)
        self.flooding = False  # being stopped for flooding its log: not ended until the note is written
        _FLOOD.watch(self)

    def exit_code(self) -> int | None:
        return None if self.flooding else self._proc.poll()

    def wait_ended(self, timeout: float) -> bool:
        """Block until exit_code() is not None (True) or `timeout` seconds pass (False): asleep on the
        process until it exits, not looking at it again and again."""
        deadline = time.monotonic() + max(timeout, 0.0)
        try:
            self._proc.wait(timeout=max(timeout, 0.0))
        except subprocess.TimeoutExpired:
            return False
        while self.exit_code() is None:  # its flood guard is still writing why it was killed
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def write(self, data: bytes) -> None:
        stdin = self._proc.stdin
        if stdin is None or stdin.closed:
            raise ToolError(f"stdin of {self.id} is closed")
        try:
            written = os.write(stdin.fileno(), data)
        except BlockingIOError:
            written = 0
        except (BrokenPipeError, OSError) as exc:
            raise ToolError(f"cannot write to {self.id}: it has exited or closed its stdin ({exc})") from exc
        if written < len(data):
            raise ToolError(f"{self.id} is not reading its stdin: only {written} of {len(data)} bytes were "
                            "accepted; poll its output or kill it")

    def close_stdin(self) -> None:
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            try:
                self._proc.stdin.close()
            except OSError:
                pass

    def kill(self) -> None:
        kill_group(self._proc.pid)
        _FLOOD.forget(self)
        self.close_stdin()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._live.discard(self._proc.pid)


class _FloodGuard:
    """One thread per process, running while host background commands do: a command whose output log
    passes SPOOL_LIMIT bytes is killed (one `yes` must not fill the host's disk), with a note in its log."""

    def __init__(self) -> None:
        self._watched: set[HostBackground] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, proc: HostBackground) -> None:
        with self._lock:
            self._watched.add(proc)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="hx-bg-flood", daemon=True)
                self._thread.start()

    def forget(self, proc: HostBackground) -> None:
        with self._lock:
            self._watched.discard(proc)

    def _run(self) -> None:
        while True:
            with self._lock:
                procs = list(self._watched)
                if not procs:
                    self._thread = None
                    return
            for proc in procs:
                if proc.exit_code() is not None:
                    self.forget(proc)
                elif proc.log.full():
                    self._stop(proc)
            time.sleep(0.05)


    def _stop(self, proc: HostBackground) -> None:
        """Kill the group, let the output settle (bwrap's command, in its own session, dies a moment
        after bwrap), then append the note: whoever sees the command ended also sees why."""
        proc.flooding = True
        self.forget(proc)
        kill_group(proc._proc.pid)
        proc._proc.wait()
        try:
            size, deadline = -1, time.monotonic() + 5
            while size != (size := proc.log._size()) and time.monotonic() < deadline:
                time.sleep(0.1)
            note = f"\n[killed: it printed more than {SPOOL_LIMIT >> 20} MB of output]\n"
            os.write(proc.log.file.fileno(), note.encode())  # at the end: the offset is shared
        except (OSError, ValueError):  # its sandbox closed meanwhile
            pass
        finally:
            proc.flooding = False


_FLOOD = _FloodGuard()


class BackgroundSet:
    """The background processes of one sandbox, by id. The sandbox calls kill_all() when it closes."""

    def __init__(self, limit: int = MAX_PER_SANDBOX) -> None:
        self._procs: dict[str, Background] = {}
        self._limit = limit
        self._lock = threading.Lock()
        self._started = 0

    def next_id(self) -> str:
        """The id for the next process (call check_room first)."""
        with self._lock:
            self._started += 1
            return session_id(self._started)

    def check_room(self) -> None:
        with self._lock:
            running = sum(1 for p in self._procs.values() if p.exit_code() is None)
        if running >= self._limit:
            raise ToolError(f"{running} background processes are already running (the limit is {self._limit}); "
                            "kill one with process(action='kill') first")

    def add(self, proc: Background) -> Background:
        with self._lock:
            self._procs[proc.id] = proc
        return proc

    def get(self, session_id: str) -> Background:
        with self._lock:
            proc = self._procs.get(session_id)
            known = sorted(self._procs)
        if proc is None:
            raise ToolError(f"no background process {session_id!r}; known: {', '.join(known) or 'none'} "
                            "(start one with terminal(background=true))")
        return proc

    def all(self) -> list[Background]:
        with self._lock:
            return list(self._procs.values())

    def kill_all(self) -> None:
        with self._lock:
            procs, self._procs = list(self._procs.values()), {}
        for proc in procs:
            proc.kill()
            proc.log.close()
