"""One command in a running container through `docker exec`: its output streamed to a spool file on the
host (a flood costs disk, not memory), the clock and the command watched, and what it left killed."""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from typing import Any

from hermes_exp.errors import SandboxError
from hermes_exp.sandbox.base import SPOOL_LIMIT, ExecResult
from hermes_exp.sandbox.docker_engine import _engine_errors
from hermes_exp.sandbox.process import read_bounded

log = logging.getLogger(__name__)

KILL_GRACE = 5.0  # seconds to wait for an exec's stream to end after killing its processes
# Podman ends an exec's output stream when its command exits, background children or not, so they
# would outlive it unseen. There the command ($0) runs in a session of its own (setsid from the
# exec's shell, not a group leader, starts it in place: see docker_background), which records its id
# and is killed, children and all, when the command ends; its exit code is kept. Without setsid in
# the image, or without a writable /tmp, the command runs as it does under Docker.
SESSION = ('f=/tmp/.hx-exec-$$; if command -v setsid >/dev/null 2>&1; then '
           'setsid sh -c \'echo $$ 2>/dev/null > "$1"; exec sh -c "$0"\' "$0" "$f"; rc=$?; '
           'read -r g 2>/dev/null < "$f" && kill -9 -"$g" 2>/dev/null; rm -f "$f"; exit $rc; '
           'else exec sh -c "$0"; fi')


def run_exec(api: Any, cid: str, command: str, timeout: float, *, workdir: str, env: dict[str, str],
             output_limit: int, user: str | None = None, own_session: bool = False) -> ExecResult:
    """Run `command` as `user` (None or "": the image's user). Stream the output in a thread while
    watching the clock and the command. When the command
    ends but background children keep its output open, or on timeout, every process of the
    container but pid 1 is killed (`kill -9 -1`, so one command at a time per sandbox), as the
    local backend kills the command's process group. `own_session`: see SESSION."""
    argv = ["sh", "-c", SESSION, command] if own_session else ["sh", "-c", command]
    with tempfile.TemporaryFile() as out:  # like run_group: a flood of output costs disk, not memory
        try:
            exec_id = api.exec_create(cid, argv, workdir=workdir, environment=env, user=user or "")["Id"]
            stream = api.exec_start(exec_id, stream=True)
            flooded = threading.Event()
            reader = threading.Thread(target=_spool, args=(stream, out, flooded), daemon=True)
            reader.start()
            ended = _wait(api, cid, exec_id, reader, time.monotonic() + timeout, flooded)
            if ended != STOPPED and (reader.is_alive() or flooded.is_set()):
                _kill_processes(api, cid, reader)
            code = {TIMED_OUT: 124, STOPPED: 137}.get(ended) or _exit_code(api, exec_id)
        except _engine_errors() as exc:
            raise SandboxError(f"docker exec failed in container {cid[:12]}: {exc}") from exc
        text, truncated = read_bounded(out, output_limit)
    if ended == TIMED_OUT:
        text += f"\n[command timed out after {timeout:g}s; its processes were killed]"
    elif ended == STOPPED:
        text += "\n[the container stopped while the command ran (under gVisor a memory limit ends it whole)]"
    elif flooded.is_set():
        text += f"\n[command killed: it printed more than {SPOOL_LIMIT >> 20} MB of output]"
        truncated = True
    return ExecResult(code, text, timed_out=ended == TIMED_OUT, truncated=truncated)


TIMED_OUT, STOPPED = "timed out", "container stopped"


def _wait(api: Any, cid: str, exec_id: str, reader: threading.Thread, deadline: float,
          flooded: threading.Event) -> str:
    """Wait for the output to end, the command to exit or flood its output: "" then, else TIMED_OUT
    if the deadline came first, or STOPPED if the container itself stopped (gVisor's whole sandbox
    ends at its memory limit, and its exec then never ends), asked about once a second."""
    step = 0.1
    while reader.is_alive() and not flooded.is_set():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return TIMED_OUT
        reader.join(min(step, remaining))
        step = min(step * 2, 1.0)  # quick commands answer fast; long ones cost few inspects
        if reader.is_alive() and not api.exec_inspect(exec_id).get("Running"):
            return ""
        if step == 1.0 and reader.is_alive() and not api.inspect_container(cid)["State"].get("Running"):
            return STOPPED
    return ""


def kill_all_but_init(api: Any, cid: str) -> None:
    """`kill -9 -1` as root: every process of the container but its pid 1 (and the killing shell)."""
    kill = api.exec_create(cid, ["sh", "-c", "kill -9 -1"], user="0")
    api.exec_start(kill["Id"])


def _kill_processes(api: Any, cid: str, reader: threading.Thread) -> None:
    kill_all_but_init(api, cid)
    reader.join(KILL_GRACE)
    if reader.is_alive():  # no `kill` in the image, or processes stuck: restart pid 1
        log.warning("docker sandbox %s: restarting the container to stop a command", cid[:12])
        api.restart(cid, timeout=0)
        reader.join(KILL_GRACE)


def _exit_code(api: Any, exec_id: str) -> int:
    for _ in range(50):  # the engine records the exit code just after the stream ends
        code = api.exec_inspect(exec_id).get("ExitCode")
        if code is not None:
            return int(code)
        time.sleep(0.01)
    return -1


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
