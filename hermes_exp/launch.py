"""The `hermes-exp` command's first step, before any import: the process is started again with glibc's
per-thread malloc cache off, then the CLI runs. Nothing else here; the CLI itself is hermes_exp/cli/app.py."""

from __future__ import annotations

import os
import sys

# Each session thread keeps the small blocks it frees (up to 1 KiB: Python objects over 512 bytes, the C
# library's own) in a cache only that thread can reuse; a session rarely asks for the same sizes again,
# so at 1024 sessions ~15 MB sat in those caches (bench/RESULTS.md, seventh pass). Off, a freed block
# goes back to the arena, where any thread reuses it. glibc reads this once, when a process starts.
TUNABLE = "glibc.malloc.tcache_count"
ENV = "GLIBC_TUNABLES"


def tunables(current: str | None) -> str | None:
    """GLIBC_TUNABLES with the cache off, keeping the user's own; None when nothing is to change (the
    user chose a tcache_count, or it is off already)."""
    items = [item for item in (current or "").split(":") if item]
    if any(item.split("=", 1)[0] == TUNABLE for item in items):
        return None
    return ":".join([*items, f"{TUNABLE}=0"])


def reexec() -> None:
    """Start this same command again with the cache off, once; a no-op off glibc or when it is set."""
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        return
    value = tunables(os.environ.get(ENV))
    argv = getattr(sys, "orig_argv", None)
    if not libc.startswith("glibc") or value is None or not sys.executable or not argv:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *argv[1:]], {**os.environ, ENV: value})


def main() -> None:
    reexec()
    from hermes_exp.cli.app import main as cli_main

    cli_main()
