"""executor.malloc_arenas: the runner's glibc malloc arenas are capped before its session threads start,
seen in glibc's own count of arenas (malloc_stats) in a real process whose threads allocate."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import pytest

from hermes_exp.errors import ConfigError
from hermes_exp.executor import JoblibExecutor

SCRIPT = """
import ctypes, sys, threading
from hermes_exp.executor import JoblibExecutor
JoblibExecutor(n_jobs=32, malloc_arenas=int(sys.argv[1]))
held, started, go = [], threading.Barrier(33), threading.Event()
def session():
    held.append(bytearray(200_000))  # a malloc in this thread (past pymalloc's small objects)
    started.wait()
    go.wait()
threads = [threading.Thread(target=session) for _ in range(32)]
for t in threads: t.start()
started.wait()
ctypes.CDLL(None).malloc_stats()  # one "Arena N:" block per arena, on stderr
go.set()
for t in threads: t.join()
"""

glibc = pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "malloc_stats"), reason="not glibc")


def arenas(cap: int, env: dict[str, str] | None = None) -> int:
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(cap)], capture_output=True, text=True, timeout=60,
                         env={**{k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}, **(env or {})})
    assert run.returncode == 0, run.stderr
    return sum(1 for line in run.stderr.splitlines() if line.startswith("Arena "))


@glibc
def test_the_cap_holds_the_arenas_of_many_threads_and_zero_keeps_glibcs_default() -> None:
    assert arenas(2) == 2
    assert arenas(0) > 2  # glibc: a new arena per thread, up to 8 per core


@glibc
def test_a_malloc_arena_max_the_user_set_is_left_as_it_is() -> None:
    assert arenas(2, {"MALLOC_ARENA_MAX": "1"}) == 1


@pytest.mark.parametrize("bad", [-1, 1.5, "two", True])
def test_a_cap_that_is_not_a_whole_number_is_a_config_error(bad) -> None:
    with pytest.raises(ConfigError, match="executor.malloc_arenas"):
        JoblibExecutor(malloc_arenas=bad)
