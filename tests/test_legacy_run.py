"""A run made by the code of 2026-12-03 (before the package was re-laid out) still resumes and re-exports
unchanged: no run identity, verifier identity or ledger layout may depend on where a module lives.

tests/data/legacy_run/ was made by `hermes-exp dataset.path=prompts.jsonl run_name=legacy sandbox=local
distribution=terminal_only` at commit 941d89f (5 prompts, 4 with verifiers: command, answer, checks, judge)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli

LEGACY = Path(__file__).resolve().parent / "data" / "legacy_run"
COMMAND = ("dataset.path=prompts.jsonl", "run_name=legacy", "sandbox=local", "distribution=terminal_only")


@pytest.fixture
def legacy(tmp_path: Path) -> Path:
    shutil.copytree(LEGACY, tmp_path / "legacy_run")
    return tmp_path / "legacy_run"


def test_the_same_command_resumes_an_old_run_with_nothing_to_run(legacy: Path):
    out = legacy / "outputs" / "legacy"
    before = (out / "trajectories.jsonl").read_bytes()
    proc = run_cli(legacy, *COMMAND)
    assert proc.returncode == 0, proc.stderr
    assert "nothing to run" in proc.stderr, proc.stderr  # same identity, every score found
    assert "holds another experiment" not in proc.stderr
    assert (out / "trajectories.jsonl").read_bytes() == before


def test_an_old_run_re_exports_the_same_trajectories(legacy: Path):
    out = legacy / "outputs" / "legacy"
    before = (out / "trajectories.jsonl").read_bytes()
    (out / "trajectories.jsonl").unlink()
    proc = run_cli(legacy, *COMMAND, "action=export")
    assert proc.returncode == 0, proc.stderr
    assert (out / "trajectories.jsonl").read_bytes() == before


def _without_timestamps(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        row["metadata"].pop("timestamp", None)
    return rows


def test_an_old_snapshot_reproduces_the_run(legacy: Path):
    """Its config names classes by the paths of the time (the sweep guard, the executor)."""
    snapshot = legacy / "outputs" / "legacy" / ".hydra"
    proc = run_cli(legacy, "--config-path", str(snapshot), "--config-name", "config", "run_name=again")
    assert proc.returncode == 0, proc.stderr
    again = legacy / "outputs" / "again" / "trajectories.jsonl"
    assert _without_timestamps(again) == _without_timestamps(legacy / "outputs" / "legacy" / "trajectories.jsonl")
