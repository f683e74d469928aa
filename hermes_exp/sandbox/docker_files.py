"""Files in and out of a running container through the engine's archive API (no command in the
container): the file tools' read and write, and whole-folder tars for fixtures, verifiers and archives."""

from __future__ import annotations

import base64
import io
import json
import posixpath
import tarfile
import time
from typing import Any

from hermes_exp.errors import SandboxError, ToolError
from hermes_exp.sandbox.base import NAME_TOO_LONG, THROUGH_A_FILE, confine
from hermes_exp.sandbox.docker_engine import _docker, _engine_errors

MODE_DIR, MODE_SYMLINK = 1 << 31, 1 << 27  # Go os.FileMode bits in the archive stat header


def stat(api: Any, cid: str, full: str) -> dict[str, Any] | None:
    """The archive stat of a container path (None if missing); the body is never read."""
    try:
        stream, found = api.get_archive(cid, full)
    except _docker().errors.NotFound:
        return None
    except _engine_errors() as exc:
        if _path_problem(exc):  # the agent's path, not the engine: no such file there
            return None
        raise SandboxError(f"cannot reach container {cid[:12]}: {exc}") from exc
    found["_stream"] = stream
    return found


def head_stat(api: Any, cid: str, full: str) -> dict[str, Any] | None:
    """The stat of a container path from the engine's HEAD /archive (no tar is made: a few ms where
    get_archive costs a tar of the path); None if missing. The SDK has no call for it: its own session,
    URL builder and error mapping are used."""
    try:
        res = api.head(api._url("/containers/{0}/archive", cid), params={"path": full})
        if res.status_code == 404:
            return None
        if res.status_code == 500 and not res.content:
            # what the engine answers (with no reason) for a path through a file or with too long a name:
            # the write goes ahead and put_archive, which says why, fails it as the agent's error
            return None
        api._raise_for_status(res)
    except _engine_errors() as exc:
        raise SandboxError(f"cannot reach container {cid[:12]}: {exc}") from exc
    header = res.headers.get("X-Docker-Container-Path-Stat")
    return json.loads(base64.b64decode(header)) if header else None


def _path_problem(exc: Any) -> bool:
    """An engine error about the path asked for (a file where a directory should be, a name longer than
    the filesystem takes): Go's text for ENOTDIR and ENAMETOOLONG."""
    text = str(getattr(exc, "explanation", "") or exc)
    return getattr(exc, "status_code", None) == 500 and ("not a directory" in text or "file name too long" in text)


def read_file(api: Any, cid: str, workdir: str, path: str, limit: int) -> bytes:
    full = posixpath.join(workdir, confine(workdir, path))
    found = stat(api, cid, full)
    if found and found["mode"] & MODE_SYMLINK and found.get("linkTarget"):
        full = posixpath.join(workdir, confine(workdir, found["linkTarget"]))
        found = stat(api, cid, full)
    if found is None:
        raise ToolError(f"no such file: {path}")
    if found["mode"] & MODE_DIR:
        raise ToolError(f"{path} is a directory")
    with tarfile.open(fileobj=_ChunkReader(found["_stream"]), mode="r|") as tar:  # streamed: no whole file
        member = tar.next()
        handle = tar.extractfile(member) if member else None
        if handle is None:
            raise ToolError(f"{path} is not a regular file")
        return handle.read(max(limit, 0))


def write_file(api: Any, cid: str, workdir: str, path: str, data: bytes) -> None:
    rel = confine(workdir, path)
    found = head_stat(api, cid, posixpath.join(workdir, rel))
    if rel == "." or (found and found["mode"] & MODE_DIR):
        raise ToolError(f"{path} is a directory")  # the engine would replace it by the file
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(rel)
        info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
        tar.addfile(info, io.BytesIO(data))
    try:  # the engine creates missing parent directories of the member
        api.put_archive(cid, workdir, buf.getvalue())
    except _docker().errors.APIError as exc:
        if _path_problem(exc):
            why = THROUGH_A_FILE if "not a directory" in str(exc) else NAME_TOO_LONG
            raise ToolError(f"cannot write {path}: {why}") from exc
        raise ToolError(f"cannot write {path}: {exc.explanation or exc}") from exc
    except _engine_errors() as exc:
        raise SandboxError(f"cannot reach container {cid[:12]}: {exc}") from exc


def put_archive(api: Any, cid: str, at: str, data: bytes) -> None:
    try:
        api.put_archive(cid, at, data)
    except _engine_errors() as exc:
        raise SandboxError(f"cannot copy files into container {cid[:12]}: {exc}") from exc


def top_names(data: bytes) -> list[str]:
    """The first parts of a tar's names (what unpacking it creates or replaces at its root)."""
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tops = {posixpath.normpath(m.name).lstrip("/").split("/")[0] for m in tar.getmembers()}
    return sorted(t for t in tops if t not in ("", "."))


def get_archive(api: Any, cid: str, workdir: str, max_bytes: int | None) -> bytes | None:
    """The working directory as a tar with paths relative to it (None beyond `max_bytes`)."""
    found = stat(api, cid, workdir)
    if found is None:
        raise SandboxError(f"container {cid[:12]} has no working directory {workdir}")
    raw = bytearray()
    for chunk in found["_stream"]:
        raw += chunk
        if max_bytes is not None and len(raw) > max_bytes + (1 << 20):
            return None
    return _strip_top(bytes(raw))


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
