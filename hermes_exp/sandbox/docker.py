"""`sandbox=docker`: one long-lived container per prompt, commands run through `docker exec`.
The only module that imports `docker` (lazily, with an install hint)."""

from __future__ import annotations

import io
import logging
import os
import posixpath
import re
import socket
import tarfile
import tempfile
import threading
import time
import uuid
from typing import Any

from hermes_exp.errors import SandboxError, ToolError
from hermes_exp.sandbox.background import BackgroundSet
from hermes_exp.sandbox.base import READ_LIMIT, SPOOL_LIMIT, ExecResult, confine
from hermes_exp.sandbox.images import ImageBuilder
from hermes_exp.sandbox.process import clean_env, read_bounded
from hermes_exp.sandbox.startrate import StartRate

log = logging.getLogger(__name__)

RUN_LABEL, TASK_LABEL, OWNER_LABEL = "hermes-exp.run", "hermes-exp.task", "hermes-exp.owner"
# pid 1 must survive `kill -9 -1` (the kernel never delivers it to a namespace's init) and reap the
# orphans that pile up from commands' background children, which a shell waiting in a loop does.
KEEPER = ["sh", "-c", "while :; do sleep 3600; done"]
KILL_GRACE = 5.0  # seconds to wait for an exec's stream to end after killing its processes
MODE_DIR, MODE_SYMLINK = 1 << 31, 1 << 27  # Go os.FileMode bits in the archive stat header
ENGINE_HINT = ("start the engine (as root: `dockerd &`, or .ci/setup-sandboxes.sh) and export "
               "DOCKER_HOST=unix:///path/to/docker.sock if it is not on the default socket; "
               "or choose sandbox=bwrap or sandbox=local")


def _docker() -> Any:
    try:
        import docker
    except ImportError as exc:
        raise SandboxError("sandbox=docker needs the `docker` Python package",
                           "pip install 'docker>=7'") from exc
    return docker


def _engine_errors() -> tuple[type[BaseException], ...]:
    import requests

    return (_docker().errors.DockerException, requests.RequestException, OSError)


class DockerSandbox:
    """A running container; `close()` force-removes it (and its anonymous volumes) whatever happened."""

    def __init__(self, api: Any, container_id: str, *, workdir: str, env: dict[str, str],
                 output_limit: int, on_close: Any) -> None:
        self.container_id = container_id
        self.workdir = workdir
        self._api, self._env, self._output_limit = api, env, output_limit
        self._on_close = on_close
        self.background = BackgroundSet()
        self.closed = False

    def exec(self, command: str, timeout: float) -> ExecResult:
        """Stream the output in a thread while watching the clock and the command. When the command
        ends but background children keep its output open, or on timeout, every process of the
        container but pid 1 is killed (`kill -9 -1`, so one command at a time per sandbox), as the
        local backend kills the command's process group."""
        if self.closed:
            raise SandboxError(f"docker sandbox {self.container_id[:12]} is closed")
        with tempfile.TemporaryFile() as out:  # like run_group: a flood of output costs disk, not memory
            try:
                exec_id = self._api.exec_create(self.container_id, ["sh", "-c", command],
                                                workdir=self.workdir, environment=self._env)["Id"]
                stream = self._api.exec_start(exec_id, stream=True)
                flooded = threading.Event()
                reader = threading.Thread(target=_spool, args=(stream, out, flooded), daemon=True)
                reader.start()
                timed_out = self._wait(exec_id, reader, time.monotonic() + timeout, flooded)
                if reader.is_alive() or flooded.is_set():
                    self._kill_processes(reader)
                code = 124 if timed_out else self._exit_code(exec_id)
            except _engine_errors() as exc:
                raise SandboxError(f"docker exec failed in container {self.container_id[:12]}: {exc}") from exc
            text, truncated = read_bounded(out, self._output_limit)
        if timed_out:
            text += f"\n[command timed out after {timeout:g}s; its processes were killed]"
        elif flooded.is_set():
            text += f"\n[command killed: it printed more than {SPOOL_LIMIT >> 20} MB of output]"
            truncated = True
        return ExecResult(code, text, timed_out=timed_out, truncated=truncated)

    def spawn(self, command: str) -> Any:
        """Start `command` in the background in this container (a timed-out exec() kills it too:
        `kill -9 -1` is how a docker exec's leftover processes are stopped)."""
        from hermes_exp.sandbox.docker_background import DockerBackground

        if self.closed:
            raise SandboxError(f"docker sandbox {self.container_id[:12]} is closed")
        self.background.check_room()
        try:
            return self.background.add(DockerBackground(self.background.next_id(), self._api, self.container_id,
                                                        command, workdir=self.workdir, env=self._env))
        except _engine_errors() as exc:
            raise SandboxError(f"docker exec failed in container {self.container_id[:12]}: {exc}") from exc

    def _wait(self, exec_id: str, reader: threading.Thread, deadline: float, flooded: threading.Event) -> bool:
        """Wait for the output to end, the command to exit or flood its output; True if the deadline came
        first."""
        step = 0.1
        while reader.is_alive() and not flooded.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            reader.join(min(step, remaining))
            step = min(step * 2, 1.0)  # quick commands answer fast; long ones cost few inspects
            if reader.is_alive() and not self._api.exec_inspect(exec_id).get("Running"):
                return False
        return False

    def _kill_processes(self, reader: threading.Thread) -> None:
        kill = self._api.exec_create(self.container_id, ["sh", "-c", "kill -9 -1"], user="0")
        self._api.exec_start(kill["Id"])
        reader.join(KILL_GRACE)
        if reader.is_alive():  # no `kill` in the image, or processes stuck: restart pid 1
            log.warning("docker sandbox %s: restarting the container to stop a command",
                        self.container_id[:12])
            self._api.restart(self.container_id, timeout=0)
            reader.join(KILL_GRACE)

    def _exit_code(self, exec_id: str) -> int:
        for _ in range(50):  # the engine records the exit code just after the stream ends
            code = self._api.exec_inspect(exec_id).get("ExitCode")
            if code is not None:
                return int(code)
            time.sleep(0.01)
        return -1

    def _stat(self, full: str) -> dict[str, Any] | None:
        """The archive stat of a container path (None if missing); the body is never read."""
        try:
            stream, stat = self._api.get_archive(self.container_id, full)
        except _docker().errors.NotFound:
            return None
        except _engine_errors() as exc:
            raise SandboxError(f"cannot reach container {self.container_id[:12]}: {exc}") from exc
        stat["_stream"] = stream
        return stat

    def resolve(self, path: str) -> str:
        return confine(self.workdir, path)  # symlinks resolve inside the container

    def read_file(self, path: str, limit: int = READ_LIMIT) -> bytes:
        full = posixpath.join(self.workdir, confine(self.workdir, path))
        stat = self._stat(full)
        if stat and stat["mode"] & MODE_SYMLINK and stat.get("linkTarget"):
            full = posixpath.join(self.workdir, confine(self.workdir, stat["linkTarget"]))
            stat = self._stat(full)
        if stat is None:
            raise ToolError(f"no such file: {path}")
        if stat["mode"] & MODE_DIR:
            raise ToolError(f"{path} is a directory")
        with tarfile.open(fileobj=_ChunkReader(stat["_stream"]), mode="r|") as tar:  # streamed: no whole file
            member = tar.next()
            handle = tar.extractfile(member) if member else None
            if handle is None:
                raise ToolError(f"{path} is not a regular file")
            return handle.read(max(limit, 0))

    def write_file(self, path: str, data: bytes) -> None:
        rel = confine(self.workdir, path)
        stat = self._stat(posixpath.join(self.workdir, rel))
        if rel == "." or (stat and stat["mode"] & MODE_DIR):
            raise ToolError(f"{path} is a directory")  # the engine would replace it by the file
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(rel)
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
        try:  # the engine creates missing parent directories of the member
            self._api.put_archive(self.container_id, self.workdir, buf.getvalue())
        except _docker().errors.APIError as exc:
            raise ToolError(f"cannot write {path}: {exc.explanation or exc}") from exc
        except _engine_errors() as exc:
            raise SandboxError(f"cannot reach container {self.container_id[:12]}: {exc}") from exc

    def put_archive(self, data: bytes, at: str | None = None) -> None:
        """Unpack a tar into the container's workdir (paths relative to it), or into the existing
        absolute folder `at` (Harbor's /tests and /solution: `at="/"`)."""
        try:
            self._api.put_archive(self.container_id, at or self.workdir, data)
        except _engine_errors() as exc:
            raise SandboxError(f"cannot copy files into container {self.container_id[:12]}: {exc}") from exc

    def get_archive(self, max_bytes: int | None = None) -> bytes | None:
        """The container's working directory as a tar with paths relative to it (None beyond `max_bytes`)."""
        stat = self._stat(self.workdir)
        if stat is None:
            raise SandboxError(f"container {self.container_id[:12]} has no working directory {self.workdir}")
        raw = bytearray()
        for chunk in stat["_stream"]:
            raw += chunk
            if max_bytes is not None and len(raw) > max_bytes + (1 << 20):
                return None
        return _strip_top(bytes(raw))

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            _quietly_remove(self._api, self.container_id)  # ends its background processes too
            self.background.kill_all()
        finally:
            self._on_close()


def _strip_top(raw: bytes) -> bytes:
    """The engine names a directory's entries after it (`task/a.txt`): rebase them on the directory."""
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(raw)) as src, tarfile.open(fileobj=out, mode="w") as dst:
        for member in src:
            _, _, rest = member.name.partition("/")
            if not rest:
                continue
            member.name = rest
            if member.islnk():  # hard links name their target by its full archive path too
                member.linkname = member.linkname.partition("/")[2]
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
    return out.getvalue()


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _is_leftover(labels: dict[str, str]) -> bool:
    """A container of this run whose creating process is gone (a crash, a kill -9, an earlier attempt).
    Containers made by a live process (a sibling worker) or on another machine are left alone."""
    owner = labels.get(OWNER_LABEL)
    if not owner:
        return True
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    return False


class DockerSandboxFactory:
    """Opens one container per task. Construction touches nothing: the engine is contacted on first
    use (or in preflight), each distinct image is checked once, and live containers are capped."""

    def __init__(self, image: str = "python:3.11-slim", network: bool = False, memory_mb: int = 2048,
                 cpus: float = 1.0, pids_limit: int = 256, read_only: bool = False, max_sandboxes: int = 8,
                 pull_timeout: float = 300, output_limit: int = 20000, env: dict[str, str] | None = None,
                 base_url: str | None = None, run_id: str = "run", base_dir: str = ".", max_builds: int = 2,
                 max_starts_per_second: float = 0.0, **_: Any) -> None:
        self.image, self.run_id = image, str(run_id)
        self._network, self._read_only = bool(network), bool(read_only)
        self._memory_mb, self._cpus, self._pids_limit = int(memory_mb), float(cpus), int(pids_limit)
        self._pull_timeout, self._output_limit = float(pull_timeout), int(output_limit)
        self._env = {str(k): str(v) for k, v in (env or {}).items()}
        self._base_url = base_url
        self._slots = threading.BoundedSemaphore(int(max_sandboxes)) if int(max_sandboxes) > 0 else None
        self._start_rate = StartRate(max_starts_per_second if max_starts_per_second is not None else 0.0)
        self._lock = threading.Lock()
        self._client: Any = None
        self._images: dict[str, SandboxError | None] = {}
        self._image_locks: dict[str, threading.Lock] = {}
        self._builder = ImageBuilder(self._api, _engine_errors, base_dir, max_builds)  # a row's container.build

    def preflight(self, rows_images: set[str] | None = None, default_image: bool = True) -> None:
        """Fail once if the engine is unreachable; reap this run's leftovers; warm the images (a
        missing image is only logged here: the tasks naming it fail one by one); sandbox.image too
        unless no row runs in it (`default_image=False`)."""
        self._api()
        for image in sorted(set(rows_images or ()) | ({self.image} if default_image else set())):
            try:
                self._ensure_image(image)
            except SandboxError as exc:
                log.warning("%s", exc)

    def _api(self) -> Any:
        with self._lock:
            if self._client is None:
                docker = _docker()
                where = self._base_url or os.environ.get("DOCKER_HOST") or "the default socket"
                try:
                    client = docker.DockerClient(base_url=self._base_url) if self._base_url else docker.from_env()
                    client.ping()
                except _engine_errors() as exc:
                    raise SandboxError(f"cannot reach the Docker engine at {where}: {exc}", ENGINE_HINT) from exc
                self._client = client
                self._reap(everything=False)
            return self._client.api

    def _reap(self, *, everything: bool) -> int:
        """Remove this run's containers: leftovers only, or (at shutdown) all. Never other runs'."""
        removed = 0
        for c in self._client.api.containers(all=True, filters={"label": f"{RUN_LABEL}={self.run_id}"}):
            if (everything or _is_leftover(c.get("Labels") or {})) and _quietly_remove(self._client.api, c["Id"]):
                removed += 1
        if removed:
            log.info("removed %d container(s) of run %s", removed, self.run_id)
        return removed

    def _ensure_image(self, image: str) -> None:
        """Present locally, else pulled within pull_timeout; the answer is cached either way."""
        with self._lock:
            lock = self._image_locks.setdefault(image, threading.Lock())
        with lock:
            if image not in self._images:
                self._images[image] = self._find_or_pull(image)
        if self._images[image] is not None:
            raise self._images[image]

    def _find_or_pull(self, image: str) -> SandboxError | None:
        api, docker = self._api(), _docker()
        try:
            api.inspect_image(image)
            return None
        except docker.errors.ImageNotFound:
            pass
        except _engine_errors() as exc:
            return SandboxError(f"cannot inspect docker image {image!r}: {exc}", ENGINE_HINT)
        outcome: list[BaseException | None] = []
        repo, tag = docker.utils.parse_repository_tag(image)
        puller = threading.Thread(target=lambda: outcome.append(_pull(api, repo, tag or "latest")), daemon=True)
        puller.start()
        puller.join(self._pull_timeout)
        if not outcome or outcome[0] is not None:
            why = outcome[0] if outcome else f"no answer within pull_timeout={self._pull_timeout:g}s"
            return SandboxError(f"docker image {image!r} is not available locally and could not be pulled: {why}",
                                "build or load it (`docker build`/`docker load`), fix the row's `image`, "
                                "or set sandbox.image")
        return None

    def _placement(self, row: dict[str, Any]) -> tuple[str, str]:
        """(image, working directory) of a row: a task row's (`container`: its image or build, in
        the image's WORKDIR), else its `image`, else sandbox.image (in /task); a row's `cwd` wins."""
        if row.get("container") is not None:
            image, workdir = self._builder.task_image(row, self._ensure_image)
        else:
            image, workdir = str(row.get("image") or row.get("docker_image") or self.image), "/task"
            self._ensure_image(image)
        return image, posixpath.normpath(posixpath.join("/", str(row.get("cwd") or workdir)))

    def open(self, task_key: str, row: dict[str, Any]) -> DockerSandbox:
        image, workdir = self._placement(row)
        if self._slots:
            self._slots.acquire()
        try:
            self._start_rate.wait()
            cid = self._start(image, workdir, task_key, row.get("container") or {})
        except BaseException:
            if self._slots:
                self._slots.release()
            raise
        env = clean_env(workdir, self._env)
        for name in ("PATH", "HOME") if row.get("container") is not None else ("PATH",):
            if name not in self._env:
                env.pop(name)  # keep the image's own PATH (conda, venvs, ...); a task image's HOME
        released = threading.Event()

        def release() -> None:
            if self._slots and not released.is_set():
                released.set()
                self._slots.release()

        return DockerSandbox(self._api(), cid, workdir=workdir, env=env,
                             output_limit=self._output_limit, on_close=release)

    def _start(self, image: str, workdir: str, task_key: str, task: dict[str, Any]) -> str:
        """`task` (a row's `container`) may set its own cpus and memory_mb, and network=false; the
        network is on only when both sandbox.network and the task allow it."""
        api, docker = self._api(), _docker()
        memory = int(task.get("memory_mb") or self._memory_mb)
        network = self._network and task.get("network", True) is not False
        # a writable volume at the workdir, unless that is / (a Harbor image without WORKDIR)
        mounts = [docker.types.Mount(workdir, None, type="volume")] if self._read_only and workdir != "/" else []
        host_config = api.create_host_config(
            network_mode="bridge" if network else "none", mem_limit=f"{memory}m",
            memswap_limit=f"{memory}m",  # no swap: the memory limit is a real limit
            nano_cpus=int(float(task.get("cpus") or self._cpus) * 1e9), pids_limit=self._pids_limit,
            read_only=self._read_only,
            mounts=mounts, tmpfs={"/tmp": "rw,exec,size=256m"} if self._read_only else None,
            security_opt=["no-new-privileges"])
        name = re.sub(r"[^a-zA-Z0-9_.-]", "-", f"hx-{self.run_id[:24]}-{task_key.split(':')[-1][:12]}")
        cid = None
        try:
            cid = api.create_container(
                image, KEEPER, working_dir=workdir, host_config=host_config, name=f"{name}-{uuid.uuid4().hex[:6]}",
                labels={RUN_LABEL: self.run_id, TASK_LABEL: task_key, OWNER_LABEL: _owner()})["Id"]
            api.start(cid)
            return cid
        except _engine_errors() as exc:
            if cid:
                _quietly_remove(api, cid)
            raise SandboxError(f"cannot start a container from image {image!r} for task {task_key}: {exc}") from exc

    def shutdown(self) -> None:
        """Remove every container of this run that is still there. Safe to call twice."""
        try:
            self._api()
            self._reap(everything=True)
        except SandboxError as exc:
            # An engine that never answered holds nothing of ours; the start-up error said it all.
            if self._client is not None:
                log.warning("docker sandbox shutdown: %s", exc)


def _pull(api: Any, repo: str, tag: str) -> BaseException | None:
    try:
        api.pull(repo, tag=tag)
        api.inspect_image(f"{repo}:{tag}")  # some pull failures arrive inside a 200 response
        return None
    except Exception as exc:  # reported to the task that needs the image
        return exc


def _spool(stream: Any, out: Any, flooded: threading.Event) -> None:
    """Copy the exec's output to the spool file, up to SPOOL_LIMIT bytes; past that, say so and keep
    reading without keeping (a stream nobody reads would stall the engine) until the command is killed."""
    for chunk in stream:
        if flooded.is_set():
            continue
        if out.tell() > SPOOL_LIMIT:
            flooded.set()
            continue
        out.write(chunk)


class _ChunkReader(io.RawIOBase):
    """A readable file over the engine's archive stream (an iterator of byte chunks)."""

    def __init__(self, chunks: Any) -> None:
        self._chunks, self._buffer = iter(chunks), b""

    def readable(self) -> bool:
        return True

    def readinto(self, out: Any) -> int:
        while not self._buffer:
            self._buffer = next(self._chunks, b"")
            if not self._buffer:
                return 0
        n = min(len(out), len(self._buffer))
        out[:n], self._buffer = self._buffer[:n], self._buffer[n:]
        return n


def _quietly_remove(api: Any, cid: str) -> bool:
    """Force-remove a container and its anonymous volumes; never raises (cleanup must not mask the
    error that brought us here). False if it could not be removed."""
    try:
        api.remove_container(cid, force=True, v=True)
    except _docker().errors.NotFound:
        pass
    except _engine_errors() as exc:
        log.warning("could not remove container %s: %s", cid[:12], exc)
        return False
    return True
