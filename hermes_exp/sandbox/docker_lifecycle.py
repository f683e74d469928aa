"""Creating and starting one task container: its limits, its labels, its keeper process."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from hermes_exp.errors import SandboxError
from hermes_exp.sandbox.docker_engine import (OWNER_LABEL, RUN_LABEL, TASK_LABEL, _docker, _engine_errors, owner,
                                              quietly_remove)

# pid 1 must survive `kill -9 -1` (the kernel never delivers it to a namespace's init) and reap the
# orphans that pile up from commands' background children, which a shell waiting in a loop does.
KEEPER = ["sh", "-c", "while :; do sleep 3600; done"]
# Without a network the container is created with networking disabled: its own network namespace with
# only `lo` either way, but no libnetwork prestart hook (a re-exec of dockerd for every start: about 60%
# of a start here) and no /etc/hosts from the engine, so the keeper's first act is to give `localhost` a
# line (a first exec, which travels through the engine, containerd and runc, comes well after in practice).
HOSTS = r"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
KEEPER_NO_NETWORK = ["sh", "-c", f"grep -qs localhost /etc/hosts || printf '{HOSTS}' >> /etc/hosts 2>/dev/null; "
                     "while :; do sleep 3600; done"]
ROOT_USERS = ("", "root", "0", "root:root", "0:0")


@dataclass(frozen=True)
class Limits:
    """sandbox.* settings every container gets (a row's `container` may lower cpus/memory, drop network)."""

    network: bool = False
    read_only: bool = False
    memory_mb: int = 2048
    cpus: float = 1.0
    pids_limit: int = 256
    runtime: str | None = None  # the OCI runtime (sandbox.runtime); None = the engine's default


def networked(limits: Limits, task: dict[str, Any]) -> bool:
    """The network is on only when both sandbox.network and the task (a row's `container`) allow it."""
    return limits.network and task.get("network", True) is not False


def without_network_stack(limits: Limits, task: dict[str, Any], user: str | None) -> bool:
    """Whether the container can go without the engine's network setup: no network, and the keeper
    can write /etc/hosts (a writable root and a root user; else the engine's hosts file is kept)."""
    return not networked(limits, task) and not limits.read_only and user in ROOT_USERS


def host_config(api: Any, limits: Limits, workdir: str, task: dict[str, Any]) -> dict[str, Any]:
    """`task` (a row's `container`) may set its own cpus and memory_mb, and network=false."""
    memory = int(task.get("memory_mb") or limits.memory_mb)
    network = networked(limits, task)
    # a writable volume at the workdir, unless that is / (a Harbor image without WORKDIR)
    mounts = [_docker().types.Mount(workdir, None, type="volume")] if limits.read_only and workdir != "/" else []
    return api.create_host_config(
        network_mode="bridge" if network else "none", mem_limit=f"{memory}m",
        memswap_limit=f"{memory}m",  # no swap: the memory limit is a real limit
        nano_cpus=int(float(task.get("cpus") or limits.cpus) * 1e9), pids_limit=limits.pids_limit,
        read_only=limits.read_only,
        mounts=mounts, tmpfs={"/tmp": "rw,exec,size=256m"} if limits.read_only else None,
        security_opt=["no-new-privileges"], runtime=limits.runtime)


def container_name(run_id: str, task_key: str) -> str:
    name = re.sub(r"[^a-zA-Z0-9_.-]", "-", f"hx-{run_id[:24]}-{task_key.split(':')[-1][:12]}")
    return f"{name}-{uuid.uuid4().hex[:6]}"


def start_container(api: Any, image: str, workdir: str, config: dict[str, Any], *, run_id: str,
                    task_key: str, no_network_stack: bool = False) -> str:
    """Create and start a container labelled for this run and process; removed again if it cannot start."""
    cid = None
    try:
        cid = api.create_container(
            image, KEEPER_NO_NETWORK if no_network_stack else KEEPER, working_dir=workdir, host_config=config,
            name=container_name(run_id, task_key), network_disabled=no_network_stack,
            labels={RUN_LABEL: run_id, TASK_LABEL: task_key, OWNER_LABEL: owner()})["Id"]
        api.start(cid)
        return cid
    except _engine_errors() as exc:
        if cid:
            quietly_remove(api, cid)
        raise SandboxError(f"cannot start a container from image {image!r} for task {task_key}: {exc}") from exc
