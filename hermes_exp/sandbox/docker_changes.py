"""What a task changed in its container outside the working directory, so a fresh container of the same
image can be put back in that state before a re-score: the engine's list of changed paths (the SDK's
`diff`, GET /containers/{id}/changes) read into one tar of the added and modified files (names relative
to /, owners and modes kept) and the list of deleted paths.

Why the list of changes and not an image committed from the container: a commit writes a layer into the
engine that nothing of the run owns (it outlives the run, is not in the run folder, cannot move to another
engine and is not bounded by verifier.archive_max_mb), while the changed files of a task are usually a few
kilobytes that travel in the sample's own archive."""

from __future__ import annotations

import io
import posixpath
import tarfile
from typing import Any

from hermes_exp.errors import SandboxError
from hermes_exp.sandbox.docker_engine import _engine_errors
from hermes_exp.sandbox.docker_files import stat

MODIFIED, ADDED, DELETED = 0, 1, 2  # the engine's change kinds
# Files the engine writes into every container itself (bind mounts, or the keeper's localhost line):
# a fresh container has its own.
ENGINE_FILES = frozenset({"/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/.dockerenv"})


def _under(path: str, folder: str) -> bool:
    return folder == "/" or path == folder or path.startswith(folder.rstrip("/") + "/")


def changed_paths(entries: list[dict[str, Any]], skip: str | None) -> tuple[list[str], list[str]]:
    """(paths to copy, paths deleted), topmost first: an added folder is copied whole, a modified
    folder only through its changed entries (a modified path with changed entries below it is a
    folder); what changed under `skip` (the working directory, archived apart) but deletions, and the
    engine's own files, are left out."""
    kinds = {str(e.get("Path")): int(e.get("Kind", MODIFIED)) for e in entries or ()}
    paths = [p for p in sorted(kinds)  # deletions in the workdir too: restoring its archive cannot delete
             if p not in ENGINE_FILES and not (skip and _under(p, skip) and kinds[p] != DELETED)]
    parents = {posixpath.dirname(p) for p in kinds}
    copy, deleted = [], []
    for path in paths:
        kind = kinds[path]
        if _covered(path, kinds, kind):
            continue
        if kind == DELETED:
            deleted.append(path)
        elif kind == ADDED or path not in parents:
            copy.append(path)
    return copy, deleted


def _covered(path: str, kinds: dict[str, int], kind: int) -> bool:
    """Whether an ancestor of `path` was added (copied whole) or deleted (removed whole) already."""
    parent = posixpath.dirname(path)
    while parent not in ("/", ""):
        if kinds.get(parent) in (ADDED, DELETED) and (kind != DELETED or kinds[parent] == DELETED):
            return True
        parent = posixpath.dirname(parent)
    return False


def changes_tar(api: Any, cid: str, skip: str | None, max_bytes: int) -> tuple[bytes | None, list[str]]:
    """(a tar of the changed paths, names relative to /, or None beyond `max_bytes`; the deleted paths)."""
    try:
        entries = api.diff(cid)
    except _engine_errors() as exc:
        raise SandboxError(f"cannot list the changes of container {cid[:12]}: {exc}") from exc
    copy, deleted = changed_paths(entries, skip)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as dst:
        for path in copy:
            if not _append(api, cid, path, dst, max_bytes - out.tell()) or out.tell() > max_bytes:
                return None, deleted
    return out.getvalue(), deleted


def _append(api: Any, cid: str, path: str, dst: tarfile.TarFile, room: int) -> bool:
    """Add `path` (the engine names its entries after the path's last part) under its full name;
    False when its tar alone exceeds `room` bytes."""
    found = stat(api, cid, path)
    if found is None:
        return True  # gone since the list was made (a temporary file): nothing to keep
    raw = bytearray()
    for chunk in found["_stream"]:
        raw += chunk
        if len(raw) > room + (1 << 20):
            return False
    parent = posixpath.dirname(path).lstrip("/")
    with tarfile.open(fileobj=io.BytesIO(bytes(raw))) as src:
        for member in src:
            member.name = posixpath.join(parent, member.name)
            if member.islnk():
                member.linkname = posixpath.join(parent, member.linkname)
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
    return True
