"""`sandbox=local`: a fresh temporary directory per prompt and a clean environment; no namespaces."""

from __future__ import annotations

import errno
import io
import os
import shutil
import stat
import tarfile
from pathlib import Path
from typing import Any

from hermes_exp.errors import SandboxError, ToolError
from hermes_exp.sandbox import options
from hermes_exp.sandbox.background import BackgroundSet, HostBackground
from hermes_exp.sandbox.base import NAME_TOO_LONG, READ_LIMIT, THROUGH_A_FILE, ExecResult, confine
from hermes_exp.sandbox.process import Spool, clean_env, kill_group, run_group
from hermes_exp.sandbox.reaper import GROUP, ProcRegistry
from hermes_exp.sandbox.stop import kill_host_groups, kill_strays
from hermes_exp.sandbox.taskdirs import TaskDirs

_WRITE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
# what Path.is_file() answered False to (ENOENT, ENOTDIR, ELOOP), and a socket (ENXIO) or too long a name
_NO_FILE = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENXIO, errno.ENAMETOOLONG)


class _Recorded(set):
    """The process groups of running commands, also recorded on disk: commands run in their own
    sessions, so a runner killed mid-command would otherwise leave them running."""

    def __init__(self, registry: ProcRegistry) -> None:
        super().__init__()
        self._registry = registry

    def add(self, pid: int) -> None:
        super().add(pid)
        self._registry.add(pid)

    def discard(self, pid: int) -> None:
        super().discard(pid)
        self._registry.discard(pid)


class LocalSandbox:
    """Commands run as host processes in the task directory. Isolation is by directory and
    environment only: see the contract suite's known failures for what this cannot prevent."""

    def __init__(self, root: Path, *, output_limit: int, env: dict[str, str], keep: bool,
                 registry: ProcRegistry | None = None) -> None:
        self.root = root
        self.workdir = str(root)
        # where the directory really is, taken once: a command that later swaps it for a symlink
        # (`cd .. && rm -r task && ln -s / task`) cannot move what file tools are confined to
        self._real = os.path.realpath(root)
        self._output_limit = output_limit
        self._env = clean_env(self.workdir, env)
        self._keep = keep
        self._live: set[int] = _Recorded(registry) if registry else set()
        self.background = BackgroundSet()
        self._spool = Spool(self.workdir)  # its commands' output file, one command after another
        self.closed = False

    def exec(self, command: str, timeout: float) -> ExecResult:
        # the directory is looked at only when the start failed (a stat per command saved): a command
        # cannot start in a directory that is gone
        try:
            return run_group(["/bin/sh", "-c", command], cwd=self.workdir, env=self._env, timeout=timeout,
                             output_limit=self._output_limit, live=self._live, reuse=self._spool)
        except OSError:
            if not self.root.is_dir():
                raise SandboxError(f"sandbox directory {self.root} is gone") from None
            raise

    def spawn(self, command: str) -> HostBackground:
        """Start `command` in the background, in the task directory, with the clean environment."""
        if self.closed or not self.root.is_dir():
            raise SandboxError(f"sandbox directory {self.root} is gone")
        self.background.check_room()
        return self.background.add(HostBackground(self.background.next_id(), ["/bin/sh", "-c", command], command,
                                                  cwd=self.workdir, env=self._env, live=self._live))

    def stop_processes(self) -> None:
        """Kill every process this sandbox's commands started, also those that left their group."""
        kill_host_groups(self.background, self._live)
        kill_strays(self._real, self.workdir)

    def host_path(self, path: str) -> Path:
        """The host path of a sandbox path, refusing escapes (including through symlinks)."""
        rel = confine(self.workdir, path)
        real = self._real
        target = os.path.realpath(os.path.join(real, rel))
        if target != real and not target.startswith(real.rstrip("/") + "/"):
            raise ToolError(f"path {path!r} resolves outside the working directory")
        return Path(target)

    def resolve(self, path: str) -> str:
        """`path` relative to the task directory, judged by where it resolves: commands run on the
        host, so a symlink the agent made (`ln -s / root`) must not lead them out."""
        target = str(self.host_path(path))
        return os.path.relpath(target, self._real) if target != self._real else "."

    def read_file(self, path: str, limit: int = READ_LIMIT) -> bytes:
        # os-level calls, each a syscall that releases the GIL: with hundreds of sessions every release is
        # a hand-off to another thread, so fewer of them (no stat first, no buffered file's fstat and
        # isatty) is less runner CPU per call. O_NONBLOCK: opening a FIFO the agent made must not hang.
        target = self.host_path(path)
        try:
            fd = os.open(target, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno not in _NO_FILE:
                raise
            raise ToolError(f"no such file: {path}") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ToolError(f"no such file: {path}")
            chunks, left = [], max(limit, 0)
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def write_file(self, path: str, data: bytes) -> None:
        target = self.host_path(path)
        try:
            try:
                fd = os.open(target, _WRITE, 0o666)
            except FileNotFoundError:  # a parent directory is missing: made, as `mkdir -p` would
                target.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(target, _WRITE, 0o666)
        except IsADirectoryError:
            raise ToolError(f"{path} is a directory") from None
        except (NotADirectoryError, FileExistsError):  # the agent's mistake, not the sandbox's failure
            raise ToolError(f"cannot write {path}: {THROUGH_A_FILE}") from None
        except OSError as exc:
            if exc.errno != errno.ENAMETOOLONG:
                raise
            raise ToolError(f"cannot write {path}: {NAME_TOO_LONG}") from None
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)

    def put_archive(self, data: bytes) -> None:
        """Unpack a tar (paths relative to the working directory) into it; nothing may land outside."""
        try:
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                tar.extractall(self.root, filter="data")
        except (tarfile.TarError, OSError) as exc:
            raise SandboxError(f"cannot unpack files into {self.root}: {exc}") from exc

    def get_archive(self, max_bytes: int | None = None) -> bytes | None:
        """The working directory as an uncompressed tar (None when it holds more than `max_bytes`)."""
        if max_bytes is not None:
            size = sum(f.stat().st_size for f in self.root.rglob("*") if f.is_file() and not f.is_symlink())
            if size > max_bytes:
                return None
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for entry in sorted(os.listdir(self.root)):
                tar.add(self.root / entry, arcname=entry)
        return buf.getvalue()

    def close(self) -> None:
        """Kill whatever still runs (close may come from another thread on shutdown), remove the dir."""
        self.closed = True
        self.background.kill_all()
        for pid in list(self._live):
            kill_group(pid)
        self._spool.close()
        if not self._keep:
            shutil.rmtree(self.root, ignore_errors=True)


class LocalSandboxFactory:
    """Opens LocalSandboxes under `root` (default: the system temp dir)."""

    def __init__(self, run_id: str | None = None, **settings: Any) -> None:
        """`settings`: sandbox.* (root, output_limit, keep, env), read by sandbox.options."""
        o = options.host(settings)
        self._dirs = TaskDirs(o["root"], run_id, o["keep"])
        self._output_limit = o["output_limit"]
        self._env = o["env"]
        self._procs = ProcRegistry(self._dirs.run_id)

    def preflight(self, rows_images: set[str] | None = None, default_image: bool = True) -> None:
        """Kill and remove this run's leftovers (a SIGKILLed runner cannot clean up after itself)."""
        self._procs.reap()
        self._dirs.reap()

    def open(self, task_key: str, row: dict[str, Any]) -> LocalSandbox:
        box = LocalSandbox(self._dirs.make(task_key), output_limit=self._output_limit, env=self._env,
                           keep=self._dirs.keep, registry=self._procs)
        self._dirs.track(box)
        return box

    def shutdown(self) -> None:
        """Close what is open here, then kill commands that other processes of the run (a processes
        executor's workers, killed on Ctrl-C) left running, and remove their directories."""
        self._dirs.close_all()
        self._procs.reap(kinds=(GROUP,))
        self._procs.close()
