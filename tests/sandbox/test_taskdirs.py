"""The local factory's bookkeeping of open sandboxes (sandbox/taskdirs.py): opening costs the same
however many sessions run, and shutdown still leaves nothing of any sandbox, closed or not."""

from __future__ import annotations

import gc
import os
import shutil
import time
from pathlib import Path

from hermes_exp.sandbox.local import LocalSandboxFactory
from hermes_exp.sandbox.reaper import registry_dir
from tests.sandbox.test_background import marker_sleep, running


def _gone(pids_of, marker: str, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while pids_of(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not pids_of(marker)


def test_shutdown_closes_open_boxes_among_closed_ones_and_cleans_up_after_dropped_ones(tmp_path: Path) -> None:
    run_id = f"taskdirs-{os.getpid()}"
    factory = LocalSandboxFactory(run_id=run_id, root=str(tmp_path))
    try:
        _open_drop_and_shut(factory, tmp_path)
    finally:
        shutil.rmtree(registry_dir(run_id), ignore_errors=True)  # the records' folder, as a run's watchdog does


def _open_drop_and_shut(factory: LocalSandboxFactory, tmp_path: Path) -> None:
    closed = [factory.open(f"v1:closed{i}", {}) for i in range(20)]
    held = factory.open("v1:held", {})
    dropped = factory.open("v1:dropped", {})  # open, and let go of without a close (a bug's path)
    command, marker = marker_sleep()
    held.spawn(command)
    dropped_command, dropped_marker = marker_sleep()
    dropped.spawn(dropped_command)
    dropped_root = dropped.root
    for box in closed:
        box.close()
    del closed, box, dropped
    gc.collect()
    assert running(marker) and running(dropped_marker)
    factory.shutdown()
    assert held.closed and not held.root.exists()
    assert not dropped_root.exists()  # removed by name, as a killed earlier invocation's leftovers are
    assert _gone(running, marker) and _gone(running, dropped_marker)  # the dropped one's through its record
    assert not list(tmp_path.iterdir())
