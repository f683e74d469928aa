"""The run's records folder (sandbox/reaper.py) across invocations, with real processes: an earlier
invocation's executor worker that exits while a new invocation runs (its parent watch polls once a
second, so it ends ~1 s after its runner) removes its own log but not the new invocation's folder, so
the new runner's stop mark still reaches its workers; nor does a killed runner's watchdog, ending late,
remove that mark; a claim left by a killed watchdog does not keep the folder forever."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import uuid

from hermes_exp.sandbox import grouplog
from hermes_exp.sandbox.reaper import Watchdog, mark_stopped, registry_dir, stopped_since


def test_an_old_workers_exit_leaves_the_new_invocations_folder() -> None:
    run_id = f"rf-{uuid.uuid4().hex[:8]}"
    where = registry_dir(run_id)
    # An earlier invocation's worker: it ran a tool command (its log, held, is in the folder) and now
    # exits when told, as it does when its parent watch sees the runner gone (atexit: grouplog.close_all).
    worker = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, sys
        from hermes_exp.sandbox.reaper import ProcRegistry
        procs = ProcRegistry({run_id!r})
        procs.add(os.getpid())
        procs.discard(os.getpid())
        print("ready", flush=True)
        sys.stdin.read()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout.readline() == "ready\n"
        assert len(list(where.glob(grouplog.PREFIX + "*"))) == 1
        since = time.time()
        with Watchdog(run_id):  # the new invocation: its start-up reap leaves the live worker's log
            worker.stdin.close()
            assert worker.wait(timeout=30) == 0
            assert not list(where.glob(grouplog.PREFIX + "*"))  # the old worker's log went with it
            mark_stopped(run_id)  # the new runner's shutdown
            assert stopped_since(run_id, since), "the old worker removed the new invocation's folder"
        assert not where.exists()  # the new invocation's watchdog removes it at the end
    finally:
        worker.kill()
        worker.wait()
        subprocess.run(["rm", "-rf", str(where)])


def test_a_claim_left_by_a_killed_watchdog_does_not_keep_the_folder() -> None:
    run_id = f"rf-{uuid.uuid4().hex[:8]}"
    where = registry_dir(run_id)
    where.mkdir(parents=True)
    (where / "invocation-1").touch()  # an earlier invocation whose watchdog was SIGKILLed with it
    try:
        with Watchdog(run_id):
            assert [path.name for path in where.iterdir()] == [f"invocation-{os.getpid()}"]
        assert not where.exists()
    finally:
        subprocess.run(["rm", "-rf", str(where)])


def test_a_killed_runners_watchdog_leaves_the_next_invocations_stop_mark() -> None:
    run_id = f"rf-{uuid.uuid4().hex[:8]}"
    where = registry_dir(run_id)
    try:
        with Watchdog(run_id):  # the old runner; its watchdog ends when the runner does
            since = time.time()
            (where / "invocation-1").touch()  # a later invocation (runlock.py: this one was killed)...
            mark_stopped(run_id)  # ...already shutting down
        assert stopped_since(run_id, since) and sorted(p.name for p in where.iterdir()) == ["invocation-1", "stopped"]
    finally:
        subprocess.run(["rm", "-rf", str(where)])
