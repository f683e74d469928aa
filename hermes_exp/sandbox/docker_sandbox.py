"""`DockerSandbox`: one task's running container. Commands go through `docker exec` (docker_exec),
the file tools' read and write through an exec each (docker_file_tools), folders through the archive
API (docker_files); `close()` hands the container to its factory's removal
(in the background by default: docker_remover)."""

from __future__ import annotations

import posixpath
import shlex
from typing import Any

from hermes_exp.errors import SandboxError
from hermes_exp.sandbox import docker_changes as changes
from hermes_exp.sandbox import docker_file_tools as file_tools
from hermes_exp.sandbox import docker_files as files
from hermes_exp.sandbox.background import BackgroundSet
from hermes_exp.sandbox.base import READ_LIMIT, ExecResult, confine
from hermes_exp.sandbox.docker_engine import _engine_errors
from hermes_exp.sandbox.docker_exec import kill_all_but_init, run_exec


class DockerSandbox:
    """A running container. `close()` gives it up whatever happened: `on_close(container_id, then)`
    removes it (and its anonymous volumes), now or in the background, and runs `then` (which ends
    the background processes' streams) after; nothing of it is used again."""

    def __init__(self, api: Any, container_id: str, *, workdir: str, env: dict[str, str],
                 output_limit: int, on_close: Any, user: str | None = None, own_session: bool = False) -> None:
        """`user`: who the agent's commands run as (a Harbor task's [agent].user; None: the image's user).
        `own_session`: run each command in a session of its own, killed when it ends (Podman:
        docker_exec.SESSION)."""
        self.container_id = container_id
        self.user = user
        self.workdir = workdir
        self._api, self._env, self._output_limit = api, env, output_limit
        self._own_session = own_session
        self._on_close = on_close
        self.background = BackgroundSet()
        self.closed = False

    def _check_open(self) -> None:
        if self.closed:
            raise SandboxError(f"docker sandbox {self.container_id[:12]} is closed")

    def exec(self, command: str, timeout: float) -> ExecResult:
        """See docker_exec.run_exec: one command at a time per sandbox, as the agent's user."""
        return self.exec_as(self.user, command, timeout)

    def exec_as(self, user: str | None, command: str, timeout: float) -> ExecResult:
        """exec() as `user` (None or "": the image's user), e.g. a Harbor task's [verifier].user."""
        self._check_open()
        return run_exec(self._api, self.container_id, command, timeout, workdir=self.workdir, env=self._env,
                        output_limit=self._output_limit, user=user, own_session=self._own_session)

    def spawn(self, command: str) -> Any:
        """Start `command` in the background in this container (a timed-out exec() kills it too:
        `kill -9 -1` is how a docker exec's leftover processes are stopped)."""
        from hermes_exp.sandbox.docker_background import DockerBackground

        self._check_open()
        self.background.check_room()
        try:
            return self.background.add(DockerBackground(self.background.next_id(), self._api, self.container_id,
                                                        command, workdir=self.workdir, env=self._env, user=self.user))
        except _engine_errors() as exc:
            raise SandboxError(f"docker exec failed in container {self.container_id[:12]}: {exc}") from exc

    def stop_processes(self) -> None:
        """Kill every process of the container but its pid 1 (the keeper, not the agent's)."""
        self._check_open()
        self.background.kill_all()
        try:
            kill_all_but_init(self._api, self.container_id)
        except _engine_errors() as exc:
            raise SandboxError(f"cannot stop the processes of container {self.container_id[:12]}: {exc}") from exc

    def resolve(self, path: str) -> str:
        return confine(self.workdir, path)  # symlinks resolve inside the container

    def read_file(self, path: str, limit: int = READ_LIMIT) -> bytes:
        return file_tools.read_file(self._api, self.container_id, self.workdir, path, limit, self.user)

    def write_file(self, path: str, data: bytes) -> None:
        file_tools.write_file(self._api, self.container_id, self.workdir, path, data, self.user)

    def put_archive(self, data: bytes, at: str | None = None, as_is: bool = False) -> None:
        """Unpack a tar into the container's workdir (paths relative to it), or into the existing
        absolute folder `at` (Harbor's /tests and /solution: `at="/"`). With an agent's user, what it
        unpacked becomes that user's (the task's files are the agent's to run and change), unless
        `as_is` (a restored archive keeps the owners it recorded)."""
        files.put_archive(self._api, self.container_id, at or self.workdir, data)
        if self.user and not as_is:
            self.chown(self.user, [posixpath.join(at or self.workdir, top) for top in files.top_names(data)])

    def chown(self, user: str, paths: list[str]) -> None:
        """Give these paths (recursively) to `user`, as root."""
        if not paths:
            return
        self._check_open()
        quoted = " ".join(shlex.quote(p) for p in paths)
        run = run_exec(self._api, self.container_id, f"chown -R {shlex.quote(user)} -- {quoted}", 60.0,
                       workdir="/", env=self._env, output_limit=self._output_limit, user="0")
        if run.exit_code != 0:
            raise SandboxError(f"cannot give {quoted} to user {user!r} in container {self.container_id[:12]}: "
                               f"{run.output.strip()[:300]}", "check the task's [agent].user / [verifier].user")

    def get_archive(self, max_bytes: int | None = None) -> bytes | None:
        """The container's working directory as a tar with paths relative to it (None beyond `max_bytes`)."""
        return files.get_archive(self._api, self.container_id, self.workdir, max_bytes)

    def get_changes(self, max_bytes: int) -> tuple[bytes | None, list[str]]:
        """What the task changed outside the working directory (all of it when that is /): a tar of the
        added and modified paths, names relative to / (None beyond `max_bytes`), and the deleted paths."""
        self._check_open()
        return changes.changes_tar(self._api, self.container_id, None if self.workdir == "/" else self.workdir,
                                   max_bytes)

    def remove_paths(self, paths: list[str]) -> None:
        """Delete these absolute paths as root (what the task deleted from the image, on a restore)."""
        self._check_open()
        if paths:
            run = run_exec(self._api, self.container_id, "rm -rf -- " + " ".join(shlex.quote(p) for p in paths),
                           60.0, workdir="/", env=self._env, output_limit=self._output_limit, user="0")
            if run.exit_code != 0:
                raise SandboxError(f"cannot delete {len(paths)} path(s) in container {self.container_id[:12]}: "
                                   f"{run.output.strip()[:300]}")

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._on_close(self.container_id, self.background.kill_all)  # removal ends its processes
