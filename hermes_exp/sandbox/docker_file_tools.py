"""The file tools' read and write in a running container through one `docker exec` each: a small shell
script, the data on its stdin or its stdout. An archive call makes dockerd re-execute itself to tar or
untar in the container's root; an exec costs the engine ~40% of that under crun, ~70% under runc
(bench/RESULTS.md, tenth pass). They keep what the archive API did: a written file is root's,
mode 0644, replacing whatever non-directory was there (a symlink included) and creating missing parent
directories; a read follows a symlink only to a target inside the workdir and never opens a FIFO.
An image whose shell lacks the tools the scripts use (exit 127) falls back to the archive API."""

from __future__ import annotations

import posixpath
import socket
from typing import Any

from hermes_exp.errors import SandboxError, ToolError
from hermes_exp.sandbox import docker_files as archive
from hermes_exp.sandbox.base import NAME_TOO_LONG, THROUGH_A_FILE, confine
from hermes_exp.sandbox.docker_engine import _docker, _engine_errors
from hermes_exp.sandbox.docker_exec import _exit_code

IS_DIR, MISSING, NOT_REGULAR, SYMLINK, NOT_FOUND_127 = 21, 22, 23, 24, 127
# $0 = the path, $1 = how many bytes. `test -f` is false for a FIFO: it is never opened (no hang).
# A symlink's target is confined to the workdir by the caller, then followed as the engine did.
FOLLOWED = (f'[ -d "$0" ] && exit {IS_DIR}; [ -e "$0" ] || exit {MISSING}; [ -f "$0" ] || exit {NOT_REGULAR}; '
            'exec head -c "$1" < "$0"')
READ = f'if [ -L "$0" ]; then readlink "$0"; exit {SYMLINK}; fi; {FOLLOWED}'
# $0 = the path, $1 = its parent. rm first: like the archive API, the file replaces a symlink rather
# than writing through it, and an overwritten file gets the new owner and mode too.
WRITE = (f'[ -d "$0" ] && exit {IS_DIR}; mkdir -p "$1" && rm -f "$0" && cat > "$0" && chmod 644 "$0"')


def read_file(api: Any, cid: str, workdir: str, path: str, limit: int, user: str | None = None) -> bytes:
    """`user`: the agent's (a Harbor task's [agent].user), else root."""
    full = posixpath.join(workdir, confine(workdir, path))
    code, out, err = _run(api, cid, ["sh", "-c", READ, full, str(max(limit, 0))], None, user)
    if code == SYMLINK:  # only to a target inside the workdir (from there on, as the shell follows it)
        full = posixpath.join(workdir, confine(workdir, out.decode("utf-8", "replace").rstrip("\n")))
        code, out, err = _run(api, cid, ["sh", "-c", FOLLOWED, full, str(max(limit, 0))], None, user)
    if code == NOT_FOUND_127:
        return archive.read_file(api, cid, workdir, path, limit)
    if code == IS_DIR:
        raise ToolError(f"{path} is a directory")
    if code == MISSING:
        raise ToolError(f"no such file: {path}")
    if code == NOT_REGULAR:  # a FIFO, a device
        raise ToolError(f"{path} is not a regular file")
    if code != 0:
        raise ToolError(f"cannot read {path}: {_why(err)}")
    return out


def write_file(api: Any, cid: str, workdir: str, path: str, data: bytes, user: str | None = None) -> None:
    rel = confine(workdir, path)
    if rel == ".":
        raise ToolError(f"{path} is a directory")
    full = posixpath.join(workdir, rel)
    code, _, err = _run(api, cid, ["sh", "-c", WRITE, full, posixpath.dirname(full)], data, user)
    if code == NOT_FOUND_127:
        archive.write_file(api, cid, workdir, path, data)
    elif code == IS_DIR:
        raise ToolError(f"{path} is a directory")
    elif code != 0:
        raise ToolError(f"cannot write {path}: {_why(err)}")


def _why(err: bytes) -> str:
    """The shell's complaint, as the archive API's errors were worded for the same two path mistakes."""
    text = err.decode("utf-8", "replace").strip()
    if "Not a directory" in text or "File exists" in text:  # `mkdir -p` on a file where a directory goes
        return THROUGH_A_FILE
    if "too long" in text:
        return NAME_TOO_LONG
    return text.splitlines()[-1] if text else "the command failed"


def _run(api: Any, cid: str, argv: list[str], stdin: bytes | None, user: str | None) -> tuple[int, bytes, bytes]:
    """One exec as `user`, else root (as the archive API writes): `stdin` sent then half-closed; (exit code,
    stdout, stderr). The output is bounded by the scripts themselves (`head -c`; a write prints only errors)."""
    try:
        exec_id = api.exec_create(cid, argv, stdin=stdin is not None, user=user or "0")["Id"]
        sock = api.exec_start(exec_id, socket=True)
        try:
            if stdin is not None:
                raw = getattr(sock, "_sock", sock)
                try:
                    raw.sendall(stdin)
                    raw.shutdown(socket.SHUT_WR)
                except OSError:
                    pass  # the script exited without reading (a directory there): its code says why
            out, err = bytearray(), bytearray()
            for stream, chunk in _docker().utils.socket.frames_iter(sock, tty=False):
                (err if stream == 2 else out).extend(chunk)
        finally:
            sock.close()
        return _exit_code(api, exec_id), bytes(out), bytes(err)
    except _engine_errors() as exc:
        raise SandboxError(f"cannot reach container {cid[:12]}: {exc}") from exc
