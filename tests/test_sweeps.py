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


@pytest.mark.parametrize("swept, said", [
    ("samples_per_prompt=1,2", "pass@k for every smaller k"),
    ("num_workers=1,4", "num_workers=1 run_name=NAME"),
])
def test_a_sweep_over_a_key_left_out_of_job_dirs_is_refused_before_any_job(swept: str, said: str,
                                                                           tmp_path: Path) -> None:
    # every job would share one directory: the second would resume the first's run, not make its own
    result = run_cli(tmp_path, "-m", swept, "model=mock", "run_name=sw")
    assert result.returncode == 2, result.stderr
    key = swept.split("=")[0]
    assert f"{key} does not change a run's results" in result.stderr and said in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "outputs").exists()


def test_a_key_left_out_of_job_dirs_may_be_swept_with_one_value(tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "One point"}])
    result = run_cli(tmp_path, "-m", "num_workers=2", f"dataset.path={data}", "run_name=sw",
                     f"model.base_url={mock_server.base_url}", "sandbox=local")
    assert result.returncode == 0, result.stderr
    assert len(read_jsonl(tmp_path / "outputs" / "sw" / "sandbox=local" / "trajectories.jsonl")) == 1
