"""A shell prefix that gives a process started by a test (a Ray node, a Dask worker) a /tmp of its own, as a
node of a cluster has: a tmpfs over /tmp, inside a mount namespace (`unshare --mount`). What it must still see
to run, this checkout, its venv and the Docker engine's socket, is bound back when they live under /tmp (a fresh clone in /tmp, as CI may
make): stashed on a directory outside /tmp before the tmpfs hides them, then bound to the same paths again.
The run directory and pytest's tmp_path (under /tmp/pytest-of-*) stay hidden."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

TMP = Path("/tmp")


def code_roots() -> list[Path]:
    """The top-level folders under /tmp that hold this checkout, the interpreter's venv, or the Docker engine's
    socket (DOCKER_HOST; a node has an engine of its own, which here is the one the tests share)."""
    roots = set()
    host = os.environ.get("DOCKER_HOST", "")
    engine = [Path(host.removeprefix("unix://")).parent] if host.startswith("unix://") else []
    for path in (Path(__file__).resolve().parents[1], Path(sys.prefix).resolve(), Path(sys.executable).parent,
                 *engine):
        if path.is_relative_to(TMP) and path != TMP:
            roots.add(TMP / path.relative_to(TMP).parts[0])
    return sorted(roots)


def own_tmp(source: str = "tmpfs", size: str = "64m") -> str:
    """`sh` commands, joined by &&, that put a tmpfs named `source` over /tmp and bind the code roots back."""
    roots = code_roots()
    if not roots:
        return f"mount -t tmpfs -o size={size} {shlex.quote(source)} /tmp"
    steps = ["keep=$(mktemp -d /var/tmp/hx-keep-XXXXXX)"]
    for i, root in enumerate(roots):
        steps += [f"mkdir $keep/{i}", f"mount --bind {shlex.quote(str(root))} $keep/{i}"]
    steps.append(f"mount -t tmpfs -o size={size} {shlex.quote(source)} /tmp")
    for i, root in enumerate(roots):
        steps += [f"mkdir -p {shlex.quote(str(root))}", f"mount --bind $keep/{i} {shlex.quote(str(root))}",
                  f"umount $keep/{i}", f"rmdir $keep/{i}"]
    steps.append("rmdir $keep")
    return " && ".join(steps)
