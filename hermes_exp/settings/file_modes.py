"""`outputs.private`: owner-only outputs. A private run's directory is made 0700 and everything already in
it owner-only; from then on every file and directory hermes-exp writes takes the privacy of the directory
it is written in (0600 and 0700 in a private directory, else 0644 and the umask's usual directory mode),
so the ledger, exports, statistics, the report and the .hydra snapshot need no flag passed to them."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

PRIVATE_FILE, PRIVATE_DIR, SHARED_FILE = 0o600, 0o700, 0o644


def wanted(settings: dict[str, Any]) -> bool:
    """Whether the run asks for owner-only outputs (`outputs.private`, checked as a flag at start-up)."""
    return bool((settings.get("outputs") or {}).get("private"))


def is_private(directory: Path) -> bool:
    """A directory nobody but its owner can enter or read (group and other bits all clear)."""
    try:
        return stat.S_IMODE(directory.stat().st_mode) & 0o077 == 0
    except OSError:
        return False


def file_mode(directory: Path) -> int:
    """The mode of a new file in `directory`: owner-only in a private directory, else readable by all."""
    return PRIVATE_FILE if is_private(directory) else SHARED_FILE


def make_dir(path: Path) -> None:
    """mkdir -p, each new directory owner-only when its parent is private."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    path.mkdir(parents=True, exist_ok=True)
    for new in reversed(missing):
        if is_private(new.parent):
            os.chmod(new, PRIVATE_DIR)


def make_private(root: Path) -> None:
    """`root` 0700 and everything under it owner-only (files 0600, directories 0700); symbolic links are
    left alone (their mode means nothing, and what they point to is not an output)."""
    make_dir(root)
    os.chmod(root, PRIVATE_DIR)
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            try:
                mode = os.lstat(path).st_mode
                if not stat.S_ISLNK(mode):
                    os.chmod(path, PRIVATE_DIR if stat.S_ISDIR(mode) else PRIVATE_FILE)
            except FileNotFoundError:  # a temp file removed meanwhile
                continue
