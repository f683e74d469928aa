"""How many glibc malloc arenas a process that runs many session threads may use (`executor.malloc_arenas`).

glibc gives each new thread its own arena, up to 8 per core: 16 on two cores, each holding on to what
its threads freed. A run's session threads take turns under the GIL, so they hardly ever contend for
an arena, and with 2 arenas the runner's peak RSS at 1024 sessions was 0.86 of the default, for no
CPU that could be told apart from the noise (bench/RESULTS.md, fourth pass). The limit is set through
`mallopt` before the sessions' threads start; a MALLOC_ARENA_MAX in the environment (read by glibc at
start-up) is left as the user set it. Without glibc (musl, macOS) nothing is done."""

from __future__ import annotations

import os

M_ARENA_MAX = -8  # glibc's malloc.h


def limit_arenas(arenas: int) -> bool:
    """Cap new malloc arenas at `arenas` (0: glibc's default); True when the cap was set."""
    if arenas <= 0 or os.environ.get("MALLOC_ARENA_MAX"):
        return False
    import ctypes  # only here: the no-op invocation never builds an executor

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(M_ARENA_MAX, int(arenas)) == 1
