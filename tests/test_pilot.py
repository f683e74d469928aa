"""pilot=K: K tasks spread over the dataset, a projection for the whole run (and sweep), exit 0; the
same command without pilot runs only the rest. Real CLI, real mock server, real ledger."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from conftest import agent_bodies, run_cli, user_prompt, write_dataset

PRICED = ["model.pricing.prompt=3", "model.pricing.completion=15"]


def _prompts(record: Path) -> Counter:
    return Counter(user_prompt(b) for b in agent_bodies(record))


@pytest.mark.slow
def test_pilot_runs_k_spread_tasks_projects_and_the_next_run_does_the_rest(tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"Pilot task {i}"} for i in range(40)])
    args = [f"dataset.path={data}", "run_name=pil", f"model.base_url={mock_server.base_url}", *PRICED]
    record = tmp_path / "requests.jsonl"
    first = run_cli(tmp_path, *args, "pilot=4")
    assert first.returncode == 0, first.stderr
    assert "] 4/4 " in first.stderr and "finished earlier" not in first.stderr  # nothing ran before it
    assert set(_prompts(record)) == {f"Pilot task {i}" for i in (0, 10, 20, 30)}  # spread evenly
    proj = json.loads((tmp_path / "outputs" / "pil" / "pilot.json").read_text())
    assert proj["pilot_tasks"] == proj["settled"] == 4 and proj["tasks"] == 40 and proj["mean_cost_usd"] > 0
    assert abs(proj["projected_cost_usd"] - 40 * proj["mean_cost_usd"]) < 1e-5
    assert proj["projected_cost_p90_usd"] >= proj["projected_cost_usd"]
    assert f"projection for all 40 tasks of this run: ${proj['projected_cost_usd']:.4f}" in first.stderr

    again = run_cli(tmp_path, *args, "pilot=4")  # the same pilot again: nothing runs, the same projection
    assert again.returncode == 0 and "nothing to run: all 4 pilot tasks are settled" in again.stderr
    assert json.loads((tmp_path / "outputs" / "pil" / "pilot.json").read_text()) == proj

    before = _prompts(record)
    rest = run_cli(tmp_path, *args)
    assert rest.returncode == 0, rest.stderr
    new = _prompts(record) - before
    assert len(new) == 36 and not set(new) & set(before)  # the remaining 36, the pilot's 4 reused
    stats = json.loads((tmp_path / "outputs" / "pil" / "statistics.json").read_text())
    assert stats["kept"] == 40


@pytest.mark.slow
def test_a_pilot_sweep_projects_every_job(tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"Sweep pilot {i}"} for i in range(10)])
    result = run_cli(tmp_path, "-m", "model.name=mock-a,mock-b", f"dataset.path={data}", "run_name=sp", "pilot=2",
                     f"model.base_url={mock_server.base_url}", *PRICED)
    assert result.returncode == 0, result.stderr
    jobs = [json.loads((tmp_path / "outputs" / "sp" / f"model.name={m}" / "pilot.json").read_text())
            for m in ("mock-a", "mock-b")]
    total = sum(j["projected_cost_usd"] for j in jobs)
    assert f"pilot projection for the whole sweep (2 jobs, 20 tasks): ${total:.4f}" in result.stderr
    bad = run_cli(tmp_path, f"dataset.path={data}", "pilot=0")
    assert bad.returncode == 2 and "pilot=0 must be a positive number" in bad.stderr
