"""Private container engines for the daemonless-sandbox tests, each started for the test session in a
directory of its own and stopped at its end: Podman's Docker-compatible service (rootful, and rootless
as a user made for the tests) and a dockerd with gVisor's runsc registered. None of them makes or
removes a network interface of the host: the containers run with no network, Podman is never asked for
one, and the dockerd runs in a network namespace of its own (`unshare --net`) with --bridge=none and no
iptables: a dockerd started with --bridge=none on the host DELETES the host's docker0, the shared
engine's bridge. `start` refuses an engine that changed the host's interfaces.

Why an engine cannot run here comes back as a string (the caller skips, or fails under CI=true)."""

from __future__ import annotations

import io
import os
import pwd
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOTLESS_USER = "hxrootless"
# crun cannot raise its rlimits past this VM's hard limits: give every container lower ones
CONTAINERS_CONF = """[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
"""
# Docker's dockerd gives a no-network container to runsc without a network namespace of its own:
# runsc must be told not to build a network (see docs/sandboxes.md); runsc-plain is registered without
# that flag, to show what fails without it
DAEMON_JSON = ('{"runtimes": {"runsc": {"path": "%s", "runtimeArgs": ["--network=none"]}, '
               '"runsc-plain": {"path": "%s"}}}')


@dataclass
class Engine:
    """One running private engine: its socket URL, the runtime to ask for, the processes to stop."""

    name: str
    base_url: str
    runtime: str | None = None
    home: Path | None = None
    procs: list[subprocess.Popen] = field(default_factory=list)

    def client(self) -> Any:
        import docker

        return docker.DockerClient(base_url=self.base_url)

    def settings(self) -> dict[str, Any]:
        """The sandbox.* keys that point a docker sandbox at this engine."""
        return {"base_url": self.base_url, **({"runtime": self.runtime} if self.runtime else {})}

    def stop(self) -> None:
        """Remove its containers, stop it, and end what it left running (Podman's conmon and a runsc
        sandbox outlive their engine), then remove its directory."""
        try:
            client = self.client()
            for c in client.api.containers(all=True):
                client.api.remove_container(c["Id"], force=True, v=True)
        except Exception:  # an engine that no longer answers: what it left is ended below
            pass
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(5)
        _kill_pause_process(self.home)
        if self.home:
            _kill_processes_under(self.home)
            _unmount_under(self.home)
            shutil.rmtree(self.home, ignore_errors=True)


def start(name: str) -> Engine | str:
    """Start the engine `name` (podman, podman-rootless, runsc) with the test images loaded."""
    if os.geteuid() != 0:
        return "starting a private engine needs root (the tests run as root in CI)"
    tools = {"podman": ["podman"], "podman-rootless": ["podman", "runuser", "newuidmap", "newgidmap"],
             "runsc": ["dockerd", "runsc", "unshare"]}[name]
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        return f"{', '.join(missing)} not installed (apt-get install podman uidmap runsc docker.io)"
    home = Path(tempfile.mkdtemp(prefix=f"hx-{name}-", dir="/var/tmp"))
    before = host_links()
    starter = {"podman": _podman, "podman-rootless": _podman_rootless, "runsc": _dockerd_runsc}[name]
    engine = starter(home)
    if isinstance(engine, str):
        shutil.rmtree(home, ignore_errors=True)
        return engine
    problem = _wait_and_load(engine)
    if not problem and host_links() != before:
        problem = f"starting it changed the host's network interfaces: {before} -> {host_links()}"
    if problem:
        engine.stop()
        return problem
    return engine


def _podman(home: Path) -> Engine:
    (home / "containers.conf").write_text(CONTAINERS_CONF)
    env = {**os.environ, "CONTAINERS_CONF": str(home / "containers.conf")}
    sock = home / "podman.sock"
    cmd = ["podman", "--root", str(home / "storage"), "--runroot", str(home / "run"),
           "system", "service", "--time=0", f"unix://{sock}"]
    return Engine("podman", f"unix://{sock}", home=home, procs=[_spawn(cmd, env, home / "log")])


def _podman_rootless(home: Path) -> Engine | str:
    user = _rootless_user()
    if isinstance(user, str):
        return user
    for sub in ("xdg", "home"):
        (home / sub).mkdir(mode=0o700)
    (home / "containers.conf").write_text(CONTAINERS_CONF)
    os.chmod(home, 0o755)
    for path in (home, home / "xdg", home / "home", home / "containers.conf"):
        os.chown(path, user.pw_uid, user.pw_gid)
    sock = home / "podman.sock"
    env = ["env", f"HOME={home / 'home'}", f"XDG_RUNTIME_DIR={home / 'xdg'}",
           f"CONTAINERS_CONF={home / 'containers.conf'}"]
    cmd = ["runuser", "-u", user.pw_name, "--", *env, "podman", "--root", str(home / "storage"),
           "--runroot", str(home / "xdg" / "run"), "system", "service", "--time=0", f"unix://{sock}"]
    return Engine("podman-rootless", f"unix://{sock}", home=home, procs=[_spawn(cmd, None, home / "log")])


def _dockerd_runsc(home: Path) -> Engine:
    (home / "daemon.json").write_text(DAEMON_JSON % (shutil.which("runsc"), shutil.which("runsc")))
    sock = home / "docker.sock"
    cmd = ["unshare", "--net", "--", "dockerd", "--config-file", str(home / "daemon.json"), "--data-root", str(home / "data"),
           "--exec-root", str(home / "exec"), "-H", f"unix://{sock}", "--pidfile", str(home / "dockerd.pid"),
           "--bridge=none", "--iptables=false", "--ip-masq=false", "--ip6tables=false"]
    return Engine("runsc", f"unix://{sock}", runtime="runsc", home=home,
                  procs=[_spawn(cmd, None, home / "log")])


def host_links() -> list[str]:
    """The host's network interfaces by name, but veth pairs: the shared engine's networked containers
    (another test, in another process) come and go with theirs; a bridge (docker0, cni-podman0) stays."""
    out = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True, check=True).stdout
    return sorted(name for name in (line.split()[0] for line in out.splitlines()) if not name.startswith("veth"))


def _spawn(cmd: list[str], env: dict[str, str] | None, log: Path) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def _rootless_user() -> pwd.struct_passwd | str:
    """The user the rootless engine runs as (made once, with sub-ids for its user namespace)."""
    try:
        user = pwd.getpwnam(ROOTLESS_USER)
    except KeyError:
        made = subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", ROOTLESS_USER],
                              capture_output=True, text=True)
        if made.returncode:
            return f"cannot create the user {ROOTLESS_USER}: {made.stderr.strip()}"
        user = pwd.getpwnam(ROOTLESS_USER)
    for table, flag in (("/etc/subuid", "--add-subuids"), ("/etc/subgid", "--add-subgids")):
        lines = Path(table).read_text().splitlines() if Path(table).exists() else []
        if not any(line.split(":")[0] == ROOTLESS_USER for line in lines):
            subprocess.run(["usermod", flag, "200000-265535", ROOTLESS_USER], check=True, capture_output=True)
    return user


def _wait_and_load(engine: Engine, timeout: float = 60) -> str | None:
    """Wait for the socket to answer, then import the two busybox test images."""
    from tests.sandbox.conftest import IMAGE, IMAGE2

    deadline = time.monotonic() + timeout
    while True:
        try:
            client = engine.client()
            client.ping()
            break
        except Exception as exc:  # any way of not answering yet
            if engine.procs[0].poll() is not None or time.monotonic() > deadline:
                log = (engine.home / "log").read_text(errors="replace")[-1500:] if engine.home else ""
                return f"the {engine.name} engine did not answer ({exc}); its log ends:\n{log}"
            time.sleep(0.3)
    for image, marker in ((IMAGE, False), (IMAGE2, True)):
        repo, _, tag = image.rpartition(":")
        client.api.import_image_from_data(busybox_tar(image if marker else None), repository=repo, tag=tag,
                                          changes=['CMD ["/bin/sh"]', "ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin"])
    client.close()
    return None


def busybox_tar(marker: str | None) -> bytes:
    """A busybox root filesystem (the host's static busybox and its applets), as .ci/setup-sandboxes.sh builds."""
    buf = io.BytesIO()
    applets = subprocess.run(["/bin/busybox", "--list"], capture_output=True, text=True, check=True).stdout.split()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in ("bin", "etc", "tmp", "task", "root", "proc", "sys", "dev"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            tar.addfile(info)
        tar.add("/bin/busybox", "bin/busybox")
        for applet in set(applets) - {"busybox"}:
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
        files = {"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n",
                 "etc/group": "root:x:0:\nnogroup:x:65534:\n", **({"IMAGE2": marker + "\n"} if marker else {})}
        for path, text in files.items():
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(text.encode()), 0o644
            tar.addfile(info, io.BytesIO(text.encode()))
    return buf.getvalue()


def _kill_pause_process(home: Path | None) -> None:
    """Rootless Podman leaves a `pause` process holding its user namespace: end it with the engine."""
    pidfile = home / "xdg" / "libpod" / "tmp" / "pause.pid" if home else None
    if pidfile and pidfile.exists():
        try:
            os.kill(int(pidfile.read_text().strip()), signal.SIGKILL)
        except (ValueError, ProcessLookupError):
            pass


def _unmount_under(home: Path) -> None:
    """Podman's overlay storage bind-mounts its own directory: unmount what is left under `home`."""
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    for point in sorted((p for p in points if p.startswith(f"{home}/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True)


def _kill_processes_under(home: Path) -> None:
    """SIGKILL every process whose command line names `home` (the engine's own, started by `start`)."""
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if str(home).encode() in (proc / "cmdline").read_bytes():
                os.kill(int(proc.name), signal.SIGKILL)
        except (OSError, ValueError):
            pass
