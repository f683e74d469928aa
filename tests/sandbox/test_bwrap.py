"""Bubblewrap backend beyond the contract: unprivileged uid, rlimits, the pids cgroup, a missing
bwrap, and sandbox=auto's choice."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hermes_exp.errors import SandboxError
from hermes_exp.sandbox.auto import AutoSandboxFactory
from hermes_exp.sandbox.bwrap import PIDS_CGROUP_ROOT, BwrapSandboxFactory
from hermes_exp.sandbox.local import LocalSandbox
from tests.sandbox.conftest import require

pytestmark = pytest.mark.bwrap


@pytest.fixture
def bwrap_factory():
    require("bwrap")
    return BwrapSandboxFactory


def test_runs_as_uid_1000_without_capabilities(bwrap_factory) -> None:
    sb = bwrap_factory(run_id="test-uid").open("v1:uid", {})
    try:
        out = sb.exec("id -u; id -g; grep CapEff /proc/self/status", timeout=10).output.split()
        assert out[:2] == ["1000", "1000"]
        assert out[-1] == "0000000000000000"
    finally:
        sb.close()


def test_cpu_seconds_limit_kills_a_spinning_command(bwrap_factory) -> None:
    sb = bwrap_factory(cpu_seconds=1, run_id="test-cpu").open("v1:cpu", {})
    try:
        started = time.monotonic()
        result = sb.exec("while :; do :; done", timeout=20)
        assert not result.timed_out and result.exit_code != 0
        assert time.monotonic() - started < 10
    finally:
        sb.close()


def test_pids_limit_caps_processes_and_cgroup_is_removed(bwrap_factory) -> None:
    if not PIDS_CGROUP_ROOT.is_dir():
        pytest.skip(f"no cgroup v1 pids hierarchy at {PIDS_CGROUP_ROOT}: the limit degrades to a warning")
    sb = bwrap_factory(pids_limit=16, run_id="test-pids").open("v1:pids", {})
    group = sb._cgroup
    if group is None:
        sb.close()
        pytest.skip(f"{PIDS_CGROUP_ROOT} is not writable: the limit degrades to a warning")
    try:
        result = sb.exec("for i in $(seq 1 40); do sleep 2 & done; wait", timeout=20)
        assert "fork" in result.output.lower() or "resource temporarily unavailable" in result.output.lower()
        assert sb.exec("echo still-usable", timeout=10).output.strip() == "still-usable"
    finally:
        sb.close()
    assert not group.exists()


def test_keep_leaves_the_task_directory(bwrap_factory, tmp_path: Path) -> None:
    sb = bwrap_factory(keep=True, root=str(tmp_path), run_id="test-keep").open("v1:keep", {})
    sb.exec("echo kept > out.txt", timeout=10)
    sb.close()
    assert (sb.root / "out.txt").read_text() == "kept\n"


def test_missing_bwrap_says_how_to_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a real PATH without bwrap on it
    factory = BwrapSandboxFactory(run_id="test-missing")
    for attempt in (lambda: factory.preflight(set()), lambda: factory.open("v1:x", {})):
        with pytest.raises(SandboxError) as err:
            attempt()
        assert "bubblewrap is not installed" in str(err.value)
        assert "apt-get install -y bubblewrap" in err.value.hint and "sandbox=local" in err.value.hint


def test_auto_chooses_bwrap_where_it_works(bwrap_factory) -> None:
    factory = AutoSandboxFactory(run_id="test-auto", output_limit=500)
    assert factory.kind == "bwrap"
    sb = factory.open("v1:auto", {})
    try:
        assert sb.exec("id -u", timeout=10).output.strip() == "1000"
    finally:
        sb.close()
    factory.shutdown()


def test_auto_falls_back_to_local_without_bwrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    factory = AutoSandboxFactory(run_id="test-auto-local", memory_mb=64)
    factory.preflight(set())
    assert factory.kind == "local"
    sb = factory.open("v1:auto", {})
    try:
        assert isinstance(sb, LocalSandbox)
        assert sb.exec("echo fine", timeout=10).output.strip() == "fine"
    finally:
        sb.close()


def test_preflight_removes_only_this_runs_leftovers(bwrap_factory, tmp_path: Path) -> None:
    factory = bwrap_factory(root=str(tmp_path), run_id="hx-0123abcd")
    leftover = tmp_path / "hx-0123abcd-9f3a00112233-ab12cd_9"  # what open() names a task dir
    strangers = [tmp_path / "hx-0123abcd-notes", tmp_path / "hx-0123abcdef-9f3a00112233-ab12cd_9"]
    for d in (leftover, *strangers):
        d.mkdir()
    factory.preflight(set())
    assert not leftover.exists() and all(d.exists() for d in strangers)
