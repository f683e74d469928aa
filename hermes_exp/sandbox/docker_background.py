"""Background processes inside a docker sandbox: a `docker exec` with an attached stdin socket whose
output frames a thread copies to disk. The command leads its own session (setsid, where the image
has it), so `kill` reaches its children; removing the container ends everything anyway."""

from __future__ import annotations

import shlex
import socket
import threading
import time
from typing import Any

from hermes_exp.errors import ToolError
from hermes_exp.sandbox.background import OutputLog

# $0 = the pid file, $1 = the command. The inner shell leads its own session and group, so its pid
# (written to $0) is the group id kill() signals; it writes the command's exit code to $0.rc. Without
# setsid in the image, kill() reaches only that shell, not the command's children.
# setsid must not be the exec's own process: that process already leads a session (the engine starts
# it so), and setsid called from a group leader forks, its parent exiting at once; the engine then
# takes the exec as ended and closes its stdin and output at the container's next exec. Run as the
# outer shell's child (`; exit` keeps the shell from exec'ing it), it is in the shell's group, not a
# leader, so it starts the session in place, and the outer shell lives until the command ends.
INNER = 'echo $$ > "$0"; sh -c "$1"; echo $? > "$0.rc"'
WRAPPER = (f"inner='{INNER}'; if command -v setsid >/dev/null 2>&1; then setsid sh -c \"$inner\" \"$0\" \"$1\"; exit; "
           'else exec sh -c "$inner" "$0" "$1"; fi')
KILLED = 137  # what a shell reports for a command ended by SIGKILL


class DockerBackground:
    def __init__(self, id_: str, api: Any, container_id: str, command: str, *, workdir: str,
                 env: dict[str, str], user: str | None = None) -> None:
        from hermes_exp.sandbox.docker_engine import _docker

        self.id, self.command, self.started = id_, command, time.time()
        self.log = OutputLog()
        self._api, self._cid = api, container_id
        self._pidfile = f"/tmp/.hx-{self.id}.pid"
        self._exec_id = api.exec_create(container_id, ["sh", "-c", WRAPPER, self._pidfile, command], stdin=True,
                                        workdir=workdir, environment=env, user=user or "")["Id"]
        self._sock = api.exec_start(self._exec_id, socket=True)
        self._raw: socket.socket = getattr(self._sock, "_sock", self._sock)
        self._stdin_open = True
        self._code: int | None = None
        frames = _docker().utils.socket.frames_iter
        self._reader = threading.Thread(target=self._copy, args=(frames,), daemon=True)
        self._reader.start()

    def _copy(self, frames: Any) -> None:
        try:
            for _stream, data in frames(self._sock, tty=False):
                self.log.append(data)
        except (OSError, ValueError):
            pass  # the socket was closed by kill() or the container went away

    def exit_code(self) -> int | None:
        """None while its output stream is open; then the code the wrapper recorded (KILLED if none)."""
        if self._code is None and not self._reader.is_alive():
            try:
                run = self._api.exec_create(self._cid, ["cat", self._pidfile + ".rc"], user="0")
                text = self._api.exec_start(run["Id"]).decode("utf-8", "replace").strip()
            except Exception:  # the container is gone: nothing runs any more
                text = ""
            self._code = int(text) if text.isdigit() else KILLED
        return self._code

    def write(self, data: bytes) -> None:
        if not self._stdin_open or self.exit_code() is not None:
            raise ToolError(f"stdin of {self.id} is closed (or it has exited)")
        self._raw.settimeout(5)
        try:
            self._raw.sendall(data)
        except (OSError, socket.timeout) as exc:
            raise ToolError(f"cannot write to {self.id}: {exc}") from exc

    def close_stdin(self) -> None:
        if self._stdin_open:
            self._stdin_open = False
            try:
                self._raw.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def kill(self) -> None:
        """Signal the command's group (or its shell), then drop the stream. Never raises."""
        if self.exit_code() is None:
            script = f'p=$(cat {shlex.quote(self._pidfile)}) && {{ kill -9 -- -"$p" || kill -9 "$p"; }}'
            try:
                kill = self._api.exec_create(self._cid, ["sh", "-c", script + " 2>/dev/null"], user="0")
                self._api.exec_start(kill["Id"])
            except Exception:
                pass  # a container that is gone has killed it already
            self._reader.join(5)
        self._stdin_open = False
        try:
            self._raw.close()
        except OSError:
            pass
