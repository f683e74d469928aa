"""The Docker engine's CPU time, for benchmarks: a measure that depends less on the machine's load than
latency does. Best source: the cgroup-v1 cpuacct group the engine was started in (dockerd, containerd,
the shims and every runc/crun run they spawn, short-lived ones included, since children inherit the
group; the containers' own processes are not in it: the engine puts them in groups of their own).
Fallback: /proc of the engine's processes (utime + stime + the children they reaped), which misses
every process that exits during the measure without a measured parent to reap it (each container's
shim, and with it the runtime runs it reaped), so it undercounts; it says so."""

from __future__ import annotations

import os
from pathlib import Path

CPUACCT = Path("/sys/fs/cgroup/cpuacct")
ENGINE_COMMS = ("dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2", "runc", "crun",
                "docker-init", "docker-proxy")
TICK = os.sysconf("SC_CLK_TCK")


def engine_pid(docker_host: str | None) -> int | None:
    """The dockerd serving `docker_host` (its socket on the command line), or the only dockerd."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0].decode(errors="replace")) == "dockerd":
            found.append((int(proc.name), b" ".join(argv).decode(errors="replace")))
    sock = (docker_host or "").removeprefix("unix://")
    mine = [pid for pid, line in found if sock and sock in line]
    return (mine or [pid for pid, _ in found if len(found) == 1] or [None])[0]


def engine_group(pid: int | None) -> Path | None:
    """The engine's own cpuacct group (None when it is in the root group: that is the whole machine)."""
    if pid is None:
        return None
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(",") and path not in ("", "/"):
            group = CPUACCT / path.lstrip("/")
            return group if (group / "cpuacct.usage").exists() else None
    return None


class EngineCpu:
    """`read()` -> seconds of engine CPU so far (only differences mean anything); `source` says how."""

    def __init__(self, docker_host: str | None = None, group: str | None = None) -> None:
        self._pid = engine_pid(docker_host or os.environ.get("DOCKER_HOST"))
        self._group = Path(group) if group else engine_group(self._pid)
        self._seen: dict[int, float] = {}
        if self._group is not None:
            self.source = f"cpuacct group {self._group} (complete)"
        else:
            self.source = ("/proc of dockerd, containerd, shims, runtimes (UNDERCOUNTS: processes that exit "
                           "during the measure without a measured parent are lost, e.g. each container's shim)")

    def read(self) -> float:
        if self._group is not None:
            return int((self._group / "cpuacct.usage").read_text()) / 1e9
        total = 0.0
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                raw = (proc / "stat").read_text()
            except OSError:
                continue
            comm, rest = raw[raw.index("(") + 1:raw.rindex(")")], raw[raw.rindex(")") + 2:].split()
            if comm.startswith(ENGINE_COMMS):
                self._seen[int(proc.name)] = sum(int(x) for x in rest[11:15]) / TICK  # utime stime cutime cstime
        # a process seen once keeps counting what it had (a delta over a process that exited meanwhile
        # would otherwise go negative); what it did after its last sample is lost
        return sum(self._seen.values())
