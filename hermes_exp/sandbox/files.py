"""Files into and out of a sandbox: a row's `files` / `tests` / `solution_files` (a map path -> content,
or a local folder) copied in as one tar, and the working directory archived (gzip, size-capped) and
restored, so a `command` verifier can re-run in a fresh sandbox (`action=score`).

Sandboxes that implement `put_archive(tar_bytes)` / `get_archive() -> tar_bytes` (local, bwrap,
docker) take one call per copy and keep file modes; any other Sandbox gets one write_file per file."""

from __future__ import annotations

import gzip
import inspect
import io
import json
import posixpath
import tarfile
import time
from pathlib import Path
from typing import Any

from hermes_exp.errors import ConfigError, ToolError
from hermes_exp.sandbox.base import Sandbox, confine

FileSpec = dict[str, str] | str  # {relative path: text} or a folder (absolute, or relative to the dataset)


def _resolve_folder(spec: str, base_dir: str, field: str) -> Path:
    folder = Path(spec).expanduser()
    if not folder.is_absolute():
        folder = Path(base_dir) / folder
    if not folder.is_dir():
        raise ConfigError(f"row field `{field}` names the folder {folder}, which does not exist",
                          f"give `{field}` as an existing folder (absolute, or relative to the dataset file) "
                          "or as a map {\"path\": \"content\"}")
    return folder


def spec_tar(spec: FileSpec | None, base_dir: str, dest: str = "", field: str = "files") -> bytes:
    """An uncompressed tar of the spec's files, paths relative to the sandbox's working directory
    (under `dest`). Map entries starting with '#!' are executable; folders keep their modes."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        if isinstance(spec, str):
            tar.add(_resolve_folder(spec, base_dir, field), arcname=dest or ".")
        elif isinstance(spec, dict):
            for path, content in spec.items():
                _add_text(tar, posixpath.join(dest, confine("/", str(path))), content, field)
        elif spec is not None:
            raise ConfigError(f"row field `{field}` is a {type(spec).__name__}",
                              f"give `{field}` as a map {{\"path\": \"content\"}} or a folder path")
    return buf.getvalue()


def _add_text(tar: tarfile.TarFile, path: str, content: Any, field: str) -> None:
    if not isinstance(content, str):
        raise ConfigError(f"row field `{field}`: the content of {path!r} is a {type(content).__name__}",
                          "give every file's content as a string")
    data = content.encode("utf-8")
    info = tarfile.TarInfo(path)
    info.size, info.mtime = len(data), int(time.time())
    info.mode = 0o755 if content.startswith("#!") else 0o644
    tar.addfile(info, io.BytesIO(data))


def put_files(sandbox: Sandbox, spec: FileSpec | None, base_dir: str, dest: str = "", field: str = "files") -> int:
    """Copy a spec into the sandbox; return how many files it held. An absolute `dest` (Harbor's
    /tests, /solution) is outside the working directory: only a container can take it."""
    if not spec:
        return 0
    if posixpath.isabs(dest):
        return _put_absolute(sandbox, spec, base_dir, dest, field)
    data = spec_tar(spec, base_dir, dest, field)
    put = getattr(sandbox, "put_archive", None)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = [m for m in tar.getmembers() if m.isfile()]
        if put is None:
            for member in members:
                sandbox.write_file(member.name, tar.extractfile(member).read())
    if put is not None:
        put(data)
    return len(members)


def _put_absolute(sandbox: Sandbox, spec: FileSpec, base_dir: str, dest: str, field: str) -> int:
    put = getattr(sandbox, "put_archive", None)
    if put is None or "at" not in inspect.signature(put).parameters:
        raise ConfigError(f"row field `{field}` goes to {dest}, outside the working directory, which only "
                          f"sandbox=docker can do ({type(sandbox).__name__} cannot)", "run it with sandbox=docker")
    data = spec_tar(spec, base_dir, posixpath.normpath(dest).lstrip("/"), field)
    put(data, at="/")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return sum(1 for m in tar.getmembers() if m.isfile())


# A container's changes outside the working directory ride in the same archive, under a name no
# workdir entry is restored from: CHANGES/root/<path> (relative to /) and CHANGES/deleted.json.
CHANGES = ".hermes-exp-changes"


def archive_workdir(sandbox: Sandbox, max_bytes: int) -> tuple[bytes | None, str]:
    """The working directory as a .tar.gz (with what a container changed elsewhere), or (None, why) when
    the sandbox cannot archive or the archive would exceed `max_bytes`."""
    get = getattr(sandbox, "get_archive", None)
    if get is None:
        return None, f"{type(sandbox).__name__} cannot archive its working directory"
    changes = getattr(sandbox, "get_changes", None)
    whole_root = changes is not None and getattr(sandbox, "workdir", None) == "/"  # the changes are the workdir's
    raw = _empty_tar() if whole_root else get(max_bytes * 8)
    if raw is None:
        return None, f"the working directory is larger than {max_bytes * 8} bytes uncompressed"
    if changes is not None:
        outside, deleted = changes(max_bytes * 8)
        if outside is None:
            return None, f"the files changed outside the working directory exceed {max_bytes * 8} bytes uncompressed"
        raw = _with_changes(raw, outside, deleted)
    packed = gzip.compress(raw, compresslevel=6, mtime=0)
    if len(packed) > max_bytes:
        return None, f"the archive ({len(packed)} bytes) exceeds verifier.archive_max_mb"
    return packed, ""


def _empty_tar() -> bytes:
    buf = io.BytesIO()
    tarfile.open(fileobj=buf, mode="w").close()
    return buf.getvalue()


def _with_changes(raw: bytes, outside: bytes, deleted: list[str]) -> bytes:
    """The workdir tar with the changes outside it added under CHANGES/ (nothing added when there are none)."""
    with tarfile.open(fileobj=io.BytesIO(outside)) as more:
        if not deleted and not more.getmembers():
            return raw
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(raw)) as src, tarfile.open(fileobj=out, mode="w") as dst:
        _copy(src, dst, lambda name: name)
        with tarfile.open(fileobj=io.BytesIO(outside)) as more:
            _copy(more, dst, lambda name: f"{CHANGES}/root/{name}")
        listing = json.dumps(sorted(deleted)).encode()
        info = tarfile.TarInfo(f"{CHANGES}/deleted.json")
        info.size = len(listing)
        dst.addfile(info, io.BytesIO(listing))
    return out.getvalue()


def _copy(src: tarfile.TarFile, dst: tarfile.TarFile, rename: Any) -> None:
    for member in src:
        data = src.extractfile(member) if member.isfile() else None
        member.name = rename(member.name)
        if member.islnk():
            member.linkname = rename(member.linkname)
        dst.addfile(member, data)


def _split(raw: bytes) -> tuple[bytes, bytes | None, list[str]]:
    """(the workdir tar, the tar of changes outside it or None, the deleted paths) of an archive."""
    workdir, root, deleted = io.BytesIO(), io.BytesIO(), []
    prefix = f"{CHANGES}/root/"
    with tarfile.open(fileobj=io.BytesIO(raw)) as src, tarfile.open(fileobj=workdir, mode="w") as w, \
            tarfile.open(fileobj=root, mode="w") as r:
        for member in src:
            data = src.extractfile(member) if member.isfile() else None
            if member.name == f"{CHANGES}/deleted.json":
                deleted = json.loads(data.read())
            elif member.name.startswith(prefix):
                member.name = member.name[len(prefix):]
                if member.islnk():
                    member.linkname = member.linkname.removeprefix(prefix)
                r.addfile(member, data)
            elif member.name != CHANGES:
                w.addfile(member, data)
        found = r.offset > 0 or bool(deleted)
    return workdir.getvalue(), root.getvalue() if found else None, deleted


def restore_workdir(sandbox: Sandbox, packed: bytes) -> None:
    """Unpack an archive made by archive_workdir into a fresh sandbox: what a container deleted and
    changed outside the working directory first, then the working directory (owners as recorded)."""
    raw, outside, deleted = _split(gzip.decompress(packed))
    put = getattr(sandbox, "put_archive", None)
    if outside is not None or deleted:
        if put is None or not hasattr(sandbox, "remove_paths"):
            raise ConfigError(f"the archive holds changes outside the working directory, which only sandbox=docker "
                              f"can restore ({type(sandbox).__name__} cannot)", "re-score it with sandbox=docker")
        sandbox.remove_paths(deleted)
        if outside is not None:
            put(outside, at="/", as_is=True)
    if put is not None:
        put(raw, **({"as_is": True} if "as_is" in inspect.signature(put).parameters else {}))
        return
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        for member in tar.getmembers():
            if member.isfile():
                try:
                    sandbox.write_file(member.name, tar.extractfile(member).read())
                except ToolError:
                    continue
