"""`sandbox=bwrap`: each prompt's commands run under bubblewrap, with a read-only system, no network,
a private uid 1000, a per-task directory bound at /task, and rlimit/cgroup limits."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from hermes_exp.errors import SandboxError
from hermes_exp.sandbox import options
from hermes_exp.sandbox.background import BackgroundSet, HostBackground
from hermes_exp.sandbox.base import READ_LIMIT, ExecResult, confine
from hermes_exp.sandbox.local import LocalSandbox
from hermes_exp.sandbox.process import Spool, clean_env, kill_group, run_group
from hermes_exp.sandbox.stop import kill_host_groups
from hermes_exp.sandbox.taskdirs import TaskDirs

log = logging.getLogger(__name__)

WORKDIR = "/task"
SANDBOX_UID = 1000
PIDS_CGROUP_ROOT = Path("/sys/fs/cgroup/pids")
MEMORY_CGROUP_ROOT = Path("/sys/fs/cgroup/memory")
INSTALL_HINT = "apt-get install -y bubblewrap, or choose sandbox=local (no isolation)"

# Only what dynamically linked tools need to start and find their alternatives (awk -> mawk, ...);
# nothing secret: /etc/shadow and friends stay invisible.
ETC_ENTRIES = ("alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime",
               "passwd", "group", "nsswitch.conf")

_warned: set[str] = set()
_warn_lock = threading.Lock()


def find_bwrap() -> str:
    """The bwrap executable, or SandboxError with the install hint."""
    path = shutil.which("bwrap")
    if not path:
        raise SandboxError("bubblewrap is not installed (no `bwrap` on PATH)", INSTALL_HINT)
    return path


def bwrap_args(bwrap: str, task_dir: str, env: dict[str, str], tmp_mb: int = 0) -> list[str]:
    """The bwrap command line, up to (not including) the command to run; `tmp_mb` caps /tmp (0: no cap)."""
    args = [bwrap, "--ro-bind", "/usr", "/usr"]
    for name in ("bin", "lib", "lib32", "lib64", "libx32", "sbin"):
        top = Path("/") / name
        if top.is_symlink():  # merged-/usr Debian: /bin -> usr/bin
            args += ["--symlink", os.readlink(top), str(top)]
        elif top.is_dir():
            args += ["--ro-bind", str(top), str(top)]
    for entry in ETC_ENTRIES:
        if os.path.lexists(f"/etc/{entry}"):
            args += ["--ro-bind", f"/etc/{entry}", f"/etc/{entry}"]
    args += ["--proc", "/proc", "--dev", "/dev", *(["--size", str(tmp_mb << 20)] if tmp_mb > 0 else []),
             "--tmpfs", "/tmp", "--bind", task_dir, WORKDIR,
             # bwrap's root is a tmpfs: make it read-only too, or /etc/x would be writable.
             "--remount-ro", "/", "--chdir", WORKDIR, "--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID),
             "--gid", str(SANDBOX_UID), "--die-with-parent", "--new-session", "--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args


def probe(bwrap: str, timeout: float = 10.0) -> str | None:
    """Run `true` under the full recipe once; None if it works, else what went wrong."""
    with tempfile.TemporaryDirectory(prefix="hx-bwrap-probe-") as tmp:
        argv = bwrap_args(bwrap, tmp, clean_env(WORKDIR), tmp_mb=1) + ["/bin/true"]
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return str(exc)
    if proc.returncode != 0:
        return (proc.stderr or proc.stdout).decode("utf-8", "replace").strip() or f"exit {proc.returncode}"
    return None


def _warn_once(what: str, root: Path, exc: OSError) -> None:
    with _warn_lock:
        if what not in _warned:
            _warned.add(what)
            log.warning("bwrap sandbox: no writable cgroup v1 %s hierarchy at %s (%s); %s", root.name, root, exc, what)


def make_pids_cgroup(name: str, limit: int) -> Path | None:
    """A cgroup v1 `pids` group capping processes (RLIMIT_NPROC does not bind root), or None with a
    one-time warning when the hierarchy is missing or read-only."""
    group = PIDS_CGROUP_ROOT / "hermes-exp" / name
    try:
        group.mkdir(parents=True)
        (group / "pids.max").write_text(str(limit))
        return group
    except OSError as exc:
        _warn_once("the process-count limit is not enforced", PIDS_CGROUP_ROOT, exc)
        return None


def make_memory_cgroup(name: str, memory_mb: int) -> Path | None:
    """A cgroup v1 `memory` group capping the sandbox as a whole (RLIMIT_AS is per process, so six
    processes could hold six times the limit; /tmp's tmpfs pages are charged here too), swap
    included where the kernel accounts it; or None with a one-time warning."""
    group = MEMORY_CGROUP_ROOT / "hermes-exp" / name
    try:
        group.mkdir(parents=True)
        (group / "memory.limit_in_bytes").write_text(str(memory_mb << 20))
        if (group / "memory.memsw.limit_in_bytes").exists():
            (group / "memory.memsw.limit_in_bytes").write_text(str(memory_mb << 20))
        return group
    except OSError as exc:
        if group.is_dir():
            remove_cgroup(group)
        _warn_once("memory is capped per process only (RLIMIT_AS)", MEMORY_CGROUP_ROOT, exc)
        return None


def remove_cgroup(group: Path) -> None:
    """Kill whatever is left in the group, then remove it (rmdir fails while members still exit)."""
    for _ in range(50):
        try:
            pids = (group / "cgroup.procs").read_text().split()
        except OSError:
            return
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError, ValueError):
                pass
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)
    log.warning("bwrap sandbox: could not remove cgroup %s", group)


# Applies the limits to itself, then becomes bwrap: rlimits and the cgroup are inherited by bwrap and
# every process of the sandbox. A shell instead of a Python preexec_fn, because preexec_fn forces a
# full fork() of the runner (many threads, a large heap): that costs tens of ms of kernel time per
# command under load, where a preexec-free spawn uses vfork.
LAUNCHER = (
    'procs=$1 mem=$2 cpu=$3 memgroup=$4; shift 4\n'
    'if [ -n "$procs" ]; then echo $$ > "$procs" 2>/dev/null || true; fi\n'
    'if [ -n "$memgroup" ]; then echo $$ > "$memgroup" 2>/dev/null || true; fi\n'
    'if [ "$mem" -gt 0 ]; then ulimit -v "$mem"; fi\n'
    'if [ "$cpu" -gt 0 ]; then ulimit -t "$cpu"; fi\n'
    'exec "$@"\n'
)


def launcher(memory_mb: int, cpu_seconds: int, cgroup: Path | None, memory_group: Path | None = None) -> list[str]:
    """The argv prefix that starts bwrap with the limits (a cgroup missing: no cap of that kind)."""
    procs = str(cgroup / "cgroup.procs") if cgroup else ""
    memory = str(memory_group / "cgroup.procs") if memory_group else ""
    return ["/bin/sh", "-c", LAUNCHER, "hx-limits", procs, str(max(memory_mb, 0) * 1024), str(max(cpu_seconds, 0)),
            memory]


class BwrapSandbox:
    """Commands see only /usr (read-only), a private /tmp, and the task directory at /task.
    Files are read and written on the host side of the bind mount, confined like LocalSandbox."""

    workdir = WORKDIR

    def __init__(self, root: Path, *, argv: list[str], output_limit: int, env: dict[str, str],
                 keep: bool, cgroup: Path | None, memory_group: Path | None = None) -> None:
        self.root = root
        self._argv = argv
        self._output_limit = output_limit
        self._env = clean_env(WORKDIR, env)
        self._cgroup, self._memory_group = cgroup, memory_group  # pids, memory
        self._host = LocalSandbox(root, output_limit=output_limit, env=env, keep=keep)
        self._live: set[int] = set()  # bwrap pids of running commands, for close() from another thread
        self.background = BackgroundSet()
        self._spool = Spool(str(root))  # its commands' output file, one command after another
        self.closed = False

    def exec(self, command: str, timeout: float) -> ExecResult:
        if self.closed or not self.root.is_dir():
            raise SandboxError(f"bwrap sandbox directory {self.root} is gone")
        # Killing bwrap's process group on timeout is enough: --die-with-parent takes down the
        # sandbox's pid 1, and with it every process of its pid namespace.
        return run_group(self._argv + ["/bin/sh", "-c", command], cwd=str(self.root), env=self._env,
                         timeout=timeout, output_limit=self._output_limit,
                         live=self._live, reuse=self._spool)

    def spawn(self, command: str) -> HostBackground:
        """Start `command` in the background in its own bwrap namespace (same limits and view as exec);
        killing its group ends the namespace."""
        if self.closed or not self.root.is_dir():
            raise SandboxError(f"bwrap sandbox directory {self.root} is gone")
        self.background.check_room()
        argv = self._argv + ["/bin/sh", "-c", command]
        return self.background.add(HostBackground(self.background.next_id(), argv, command,
                                                  cwd=str(self.root), env=self._env, live=self._live))

    def stop_processes(self) -> None:
        """Kill every process this sandbox's commands started: each command's namespace ends with its
        group (its pid 1), so killing the groups is enough."""
        kill_host_groups(self.background, self._live)

    def read_file(self, path: str, limit: int = READ_LIMIT) -> bytes:
        return self._host.read_file(confine(WORKDIR, path), limit)

    def resolve(self, path: str) -> str:
        return confine(WORKDIR, path)  # symlinks resolve inside the sandbox's own mount namespace

    def write_file(self, path: str, data: bytes) -> None:
        self._host.write_file(confine(WORKDIR, path), data)

    def put_archive(self, data: bytes) -> None:
        self._host.put_archive(data)

    def get_archive(self, max_bytes: int | None = None) -> bytes | None:
        return self._host.get_archive(max_bytes)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.background.kill_all()
        for pid in list(self._live):
            kill_group(pid)
        self._spool.close()
        for group in (self._cgroup, self._memory_group):
            if group:
                remove_cgroup(group)
        self._host.close()


class BwrapSandboxFactory:
    """Opens BwrapSandboxes; checks once (lazily, or in preflight) that bubblewrap works here.
    Task directories and cgroups are named after the run, so a killed run's leftovers are found."""

    def __init__(self, run_id: str | None = None, **settings: Any) -> None:
        """`settings`: sandbox.* (local's, and memory_mb, cpu_seconds, pids_limit), read by sandbox.options."""
        o = options.bwrap(settings)
        self._dirs = TaskDirs(o["root"], run_id, o["keep"])
        self._output_limit = o["output_limit"]
        self._env = o["env"]
        self._memory_mb, self._cpu_seconds, self._pids_limit = o["memory_mb"], o["cpu_seconds"], o["pids_limit"]
        self._bwrap: str | None = None
        self._lock = threading.Lock()

    def preflight(self, rows_images: set[str] | None = None, default_image: bool = True) -> None:
        """Fail once, up front, if bubblewrap is missing or cannot create its namespaces here; remove
        what a killed earlier invocation of this run left (called before any task starts)."""
        self._checked_bwrap()
        for root in (PIDS_CGROUP_ROOT, MEMORY_CGROUP_ROOT):
            for group in self._dirs.leftovers(root / "hermes-exp"):
                remove_cgroup(group)
        self._dirs.reap()

    def _checked_bwrap(self) -> str:
        with self._lock:
            if self._bwrap is None:
                bwrap = find_bwrap()
                problem = probe(bwrap)
                if problem:
                    raise SandboxError(f"bubblewrap cannot create a sandbox here: {problem}",
                                       "run as root or enable unprivileged user namespaces "
                                       "(sysctl kernel.unprivileged_userns_clone=1), or choose sandbox=local")
                self._bwrap = bwrap
            return self._bwrap

    def open(self, task_key: str, row: dict[str, Any]) -> BwrapSandbox:
        bwrap = self._checked_bwrap()
        root = self._dirs.make(task_key)
        # No chown needed: bwrap maps uid 1000 inside to the caller's uid, which owns `root`.
        cgroup = make_pids_cgroup(root.name, self._pids_limit) if self._pids_limit > 0 else None
        memory = make_memory_cgroup(root.name, self._memory_mb) if self._memory_mb > 0 else None
        argv = launcher(self._memory_mb, self._cpu_seconds, cgroup, memory) + bwrap_args(
            bwrap, str(root), clean_env(WORKDIR, self._env), tmp_mb=max(self._memory_mb // 2, 1) if self._memory_mb > 0 else 0)
        box = BwrapSandbox(root, argv=argv, output_limit=self._output_limit, env=self._env,
                           keep=self._dirs.keep, cgroup=cgroup, memory_group=memory)
        self._dirs.track(box)
        return box

    def shutdown(self) -> None:
        """Close every sandbox still open (tasks cut short by an interrupt). Safe to call twice."""
        self._dirs.close_all()
