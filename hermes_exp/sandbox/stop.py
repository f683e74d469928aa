"""Stopping what the agent started before its sample is verified: a process left running (a
`terminal(background=true)` loop, a `setsid ... &` of a foreground command) could otherwise rewrite
the reward file after the verifier cleared it and forge its own score. Each backend's
`stop_processes()` calls in here for what it shares with the others."""

from __future__ import annotations

import os
import signal

from hermes_exp.sandbox.process import kill_group

PASSES = 3  # a loop may fork between a scan and its kill: its children are found by the next pass


def kill_host_groups(background: object, live: set[int]) -> None:
    """The sandbox's background processes, then the groups of its commands still running."""
    background.kill_all()  # type: ignore[attr-defined]
    for pid in list(live):
        kill_group(pid)


def kill_strays(root: str, home: str) -> int:
    """Kill this user's processes whose working directory is under `root` or whose HOME is `home` (what
    every command of a local sandbox starts with): those that left their process group (`setsid`). A
    process that changed both is not found; docs/verifiers.md says so. Returns how many were killed."""
    killed = 0
    for _ in range(PASSES):
        found = [pid for pid in _own_pids() if _belongs(pid, root, home)]
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        if not found:
            break
    return killed


def _own_pids() -> list[int]:
    me, uid = os.getpid(), os.getuid()
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    pids.append(int(name))
            except OSError:
                pass
    return pids


def _belongs(pid: int, root: str, home: str) -> bool:
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
        if cwd == root or cwd.startswith(root.rstrip("/") + "/"):
            return True
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return f"HOME={home}".encode() in fh.read().split(b"\0")
    except OSError:  # gone, or not ours to look at
        return False
