"""Multirun sweeps: one job per sweep point, in its own directory, on any Hydra launcher; the
command's exit code reflects every job, wherever it ran."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import read_jsonl, run_cli, write_dataset


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["basic", "joblib"])
def test_sweep_jobs_get_their_own_dirs_and_failures_reach_the_exit_code(launcher: str, tmp_path: Path,
                                                                        mock_server) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"Sweep point {i}"} for i in range(5)])
    result = run_cli(tmp_path, "-m", f"hydra/launcher={launcher}", "max_turns=0,3", f"dataset.path={data}",
                     "run_name=sw", f"model.base_url={mock_server.base_url}", "sandbox=local")
    assert result.returncode == 2, result.stderr  # the max_turns=0 job is refused
    assert "max_turns must be a positive integer, got 0" in result.stderr
    rows = read_jsonl(tmp_path / "outputs" / "sw" / "max_turns=3,sandbox=local" / "trajectories.jsonl")
    assert len(rows) == 5 and all(r["api_calls"] <= 3 for r in rows)
    assert not (tmp_path / "outputs" / "sw" / "max_turns=0,sandbox=local" / "trajectories.jsonl").exists()
