"""A real multi-node Ray cluster on one machine, for the tests: `ray start --head` and worker nodes
started with `ray start --address=...`, each worker node in namespaces of its own (mount, UTS, pid) so
that it has its own hostname and its own /tmp, and cannot see the paths it is told to hide (a test's
run directory). Every node is pid 1 of its pid namespace under `unshare --kill-child`: stopping a node
(or SIGKILL of its raylet, which ends `ray start --block`) ends every process of it, and never touches
another Ray on the machine (`ray stop` would)."""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from node_mounts import own_tmp

RAY = str(Path(sys.executable).with_name("ray"))
# Node death found within ~2 s (Ray's default waits ~15 s for a raylet killed with SIGKILL).
HEAD_ENV = {"RAY_health_check_period_ms": "500", "RAY_health_check_timeout_ms": "1000",
            "RAY_health_check_failure_threshold": "3", "RAY_health_check_initial_delay_ms": "0"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Node:
    name: str
    proc: subprocess.Popen
    log: Path
    argv: list[str]  # to start it again
    env: dict[str, str]

    def pid_in_namespace(self, comm: str) -> int | None:
        """The host pid of this node's process named `comm` (e.g. raylet), or None."""
        child = _child_of(self.proc.pid)
        if child is None:
            return None
        ns = os.readlink(f"/proc/{child}/ns/pid")
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if (entry / "comm").read_text().strip() == comm and os.readlink(entry / "ns" / "pid") == ns:
                    return int(entry.name)
            except OSError:
                continue
        return None

    def sees(self, path: Path) -> bool:
        """Whether `path` exists in this node's mount namespace."""
        child = _child_of(self.proc.pid)
        assert child is not None, f"node {self.name} is not running"
        return subprocess.run(["nsenter", "-t", str(child), "-m", "test", "-e", str(path)]).returncode == 0

    def kill_raylet(self) -> None:
        pid = self.pid_in_namespace("raylet")
        assert pid is not None, f"no raylet in node {self.name}: {self.log.read_text()[-2000:]}"
        os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        """SIGKILL to `unshare` (which ignores SIGTERM while it waits): --kill-child then kills the
        namespace's pid 1, and with it every process of the node."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)


def _child_of(pid: int) -> int | None:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


@dataclass
class Cluster:
    """A head node (0 CPUs: the driver's node runs no task) and worker nodes of 1 CPU each."""

    hidden: list[Path]
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="hxray-")))  # short: socket paths
    port: int = field(default_factory=free_port)
    nodes: list[Node] = field(default_factory=list)
    # Ray's token authentication, with a token of this cluster's own in the environment of its nodes and
    # its drivers (never ~/.ray/auth_token, which other clusters on the machine read)
    env: dict[str, str] = field(default_factory=lambda: {"RAY_AUTH_MODE": "token",
                                                         "RAY_AUTH_TOKEN": secrets.token_hex(32),
                                                         "RAY_USAGE_STATS_ENABLED": "0"})

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start_head(self) -> Node:
        argv = [RAY, "start", "--head", f"--port={self.port}", "--node-ip-address=127.0.0.1", "--num-cpus=0",
                f"--temp-dir={self.workdir / 'head'}", "--include-dashboard=false", "--disable-usage-stats",
                "--block"]
        return self._spawn("head", ["unshare", "--pid", "--fork", "--kill-child"], argv, {**self.env, **HEAD_ENV})

    def add_worker(self, name: str, ip: str) -> Node:
        """A worker node on its own loopback address (so the driver never takes it for its local node),
        with a tmpfs over /tmp and over each hidden path."""
        # the hidden paths first: /tmp's tmpfs may hide them (pytest's tmp_path is under /tmp)
        mounts = " && ".join([*(f"mount -t tmpfs -o size=64m hx-hidden {shlex.quote(str(p))}" for p in self.hidden),
                              own_tmp(f"hx-tmp-{name}")])  # this checkout and its venv stay visible
        start = shlex.join([RAY, "start", f"--address={self.address}", f"--node-ip-address={ip}", "--num-cpus=1",
                            "--disable-usage-stats", "--block"])
        script = f"hostname {shlex.quote(name)} && {mounts} && exec {start}"
        wrap = ["unshare", "--mount", "--uts", "--pid", "--fork", "--kill-child", "--mount-proc"]
        return self._spawn(name, wrap, ["sh", "-c", script], self.env)

    def _spawn(self, name: str, wrap: list[str], argv: list[str], env: dict[str, str]) -> Node:
        log = self.workdir / f"{name}.log"
        node = Node(name, self._popen([*wrap, *argv], log, env), log, [*wrap, *argv], env)
        self.nodes.append(node)
        return node

    @staticmethod
    def _popen(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
        with log.open("ab") as out:
            return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env={**os.environ, **env})

    def wait_started(self, timeout: float = 180) -> None:
        """Until every node's `ray start` said its runtime started (registered with the head). A node
        whose raylet took longer than Ray's fixed 30 s to register (a loaded machine) is started again."""
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            while b"Ray runtime started" not in node.log.read_bytes():
                assert time.monotonic() < deadline, f"node {node.name} did not start: {node.log.read_text()[-3000:]}"
                if node.proc.poll() is not None:
                    assert b"timed out during startup" in node.log.read_bytes(), \
                        f"node {node.name} exited: {node.log.read_text()[-3000:]}"
                    node.proc = self._popen(node.argv, node.log, node.env)
                time.sleep(0.2)

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.stop()
        # the nodes' last processes may still be writing their logs as the kernel ends them
        deadline = time.monotonic() + 10
        while self.workdir.exists() and time.monotonic() < deadline:
            shutil.rmtree(self.workdir, ignore_errors=True)
            time.sleep(0.2)
