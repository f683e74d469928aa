"""The sweep summary: a real two-job -m sweep through the CLI writes summary.json / summary.csv with a
row per job and the counts of each job's own statistics; hermes-exp-report --summary does it on demand."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli, write_dataset

from hermes_exp.report.summary import wilson


def test_wilson_interval_is_sound_at_the_edges() -> None:
    assert wilson(0, 0) is None
    lo, hi = wilson(10, 10)
    assert hi == 1.0 and 0.65 < lo < 0.75  # 10/10 is not proof of 100%
    lo, hi = wilson(0, 10)
    assert lo == 0.0 and 0.25 < hi < 0.35
    lo, hi = wilson(50, 100)
    assert lo < 0.5 < hi and abs((0.5 - lo) - (hi - 0.5)) < 1e-9


@pytest.mark.slow
def test_a_two_model_sweep_writes_its_summary(tmp_path: Path, mock_server) -> None:
    rows = [{"prompt": f"Summary task {i}"} for i in range(6)] + ['{"prompt": 3}']
    data = write_dataset(tmp_path / "p.jsonl", rows)
    result = run_cli(tmp_path, "-m", "model.name=mock-a,mock-b", f"dataset.path={data}", "run_name=sum",
                     "dataset.skip_invalid=true", "dataset.slice=0:5", f"model.base_url={mock_server.base_url}")
    assert result.returncode == 0, result.stderr
    sweep = tmp_path / "outputs" / "sum"
    summary = json.loads((sweep / "summary.json").read_text())
    jobs = {j["job"]: j for j in summary["jobs"]}
    assert set(jobs) == {"model.name=mock-a", "model.name=mock-b"}
    for name, job in jobs.items():
        stats = json.loads((sweep / name / "statistics.json").read_text())
        assert (job["done"], job["filtered"], job["failed"], job["pending"]) == \
               (stats["kept"], stats["filtered"], stats["failed"], stats["pending"]) == (5, 0, 0, 0)
        assert job["tasks"] == 5 and job["kept_pct"] == 100.0 and job["model"] == name.split("=")[1]
        assert job["overrides"] == {"model.name": name.split("=")[1]}  # only what tells the jobs apart
        assert job["pass_rate"] is None and job["pass_at_k"] is None  # no verifier ran
        assert job["mean_model_calls"] == stats["api_calls"] / 5 and job["mean_turns"] >= 1
        assert job["tokens"] > 0 and job["wall_seconds"] > 0
    table = csv.DictReader((sweep / "summary.csv").open())
    assert sorted(r["overrides"] for r in table) == ["model.name=mock-a", "model.name=mock-b"]
    assert "model.name=mock-a" in result.stderr and "summary.csv" in result.stderr  # the terminal table

    (sweep / "summary.json").unlink()
    again = subprocess.run([sys.executable, "-m", "hermes_exp.report", "--summary", str(sweep)],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert json.loads((sweep / "summary.json").read_text())["jobs"] == summary["jobs"]
    empty = subprocess.run([sys.executable, "-m", "hermes_exp.report", "--summary", str(tmp_path / "nothing")],
                           capture_output=True, text=True, timeout=120)
    assert empty.returncode == 2 and "no finished runs" in empty.stderr


def test_a_job_refused_before_it_ran_is_named_under_the_table(tmp_path: Path, mock_server) -> None:
    """A sweep whose second job lacks its API key: the table holds one job, and says which did not run
    (it said "(1 job)" and nothing else: a two-model comparison silently became one)."""
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "Summary task"}])
    env = {"HX_NO_KEY": ""}
    result = run_cli(tmp_path, "-m", "provider.api_key_env=null,HX_NO_KEY", f"dataset.path={data}", "run_name=nr",
                     f"model.base_url={mock_server.base_url}", env=env)
    assert result.returncode == 2, result.stderr
    assert "did not run: provider.api_key_env=HX_NO_KEY (exit 2" in result.stderr
    summary = json.loads((tmp_path / "outputs" / "nr" / "summary.json").read_text())
    assert [j["job"] for j in summary["jobs"]] == ["provider.api_key_env=null"]
    assert summary["not_run"] == [{"job": "provider.api_key_env=HX_NO_KEY", "exit_code": 2}]


def test_the_summary_of_an_outputs_folder_names_each_run_and_finds_nested_sweeps(tmp_path: Path, mock_server) -> None:
    """`hermes-exp-report --summary outputs` over two runs and a -m sweep: a row per run, named by its path
    and the settings that differ, with the values the runs used (it said `run_name=None` and
    `samples_per_prompt=None`, and skipped the sweep's jobs without a word)."""
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"Summary task {i}"} for i in range(2)])
    common = [f"dataset.path={data}", f"model.base_url={mock_server.base_url}"]
    runs = (["run_name=a"], ["run_name=b", "samples_per_prompt=2"], ["-m", "run_name=sw", "model.name=mock-a,mock-b"])
    for args in runs:
        result = run_cli(tmp_path, *args, *common)
        assert result.returncode == 0, result.stderr
    outputs = tmp_path / "outputs"
    (outputs / "c").mkdir()
    (outputs / "c" / "ledger.db").write_bytes((outputs / "a" / "ledger.db").read_bytes())  # never exported

    proc = subprocess.run([sys.executable, "-m", "hermes_exp.report", "--summary", str(outputs)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    jobs = {j["job"]: j for j in json.loads((outputs / "summary.json").read_text())["jobs"]}
    assert set(jobs) == {"a", "b", "sw/model.name=mock-a", "sw/model.name=mock-b"}
    for name, job in jobs.items():
        stats = json.loads((outputs / name / "statistics.json").read_text())
        assert (job["tasks"], job["done"], job["failed"]) == (stats["total_prompts"], stats["kept"], stats["failed"])
        assert job["overrides"] == {"samples_per_prompt": str(stats["samples_per_prompt"]), "model.name": stats["model"]}
    assert jobs["b"]["overrides"]["samples_per_prompt"] == "2" and jobs["a"]["overrides"]["model.name"] == "mock"
    assert "None" not in proc.stderr and "run_name=" not in proc.stderr
    assert "│ b samples_per_prompt=2 " in proc.stderr  # the run, then what sets it apart
    assert "skipped" in proc.stderr and "c: a ledger.db without statistics.json" in proc.stderr


# preflight=none: the agent passes GOOD and SOLUTION_WRONG, misses MISS, and FETCH's verifier cannot fetch its
# runner (verifier_suspect); preflight=oracle finds SOLUTION_WRONG and FETCH broken and never runs them.
CHECK = "grep -qx 42 answer.txt"
GOOD = {"prompt": "WRITE: answer.txt 42\nTASK-GOOD", "solution": "echo 42 > answer.txt", "verify": CHECK}
SOLUTION_WRONG = {"prompt": "WRITE: answer.txt 42\nTASK-SOLUTION-WRONG", "solution": "echo 41 > answer.txt",
                  "verify": CHECK}
FETCH = {"prompt": "WRITE: answer.txt 42\nTASK-FETCH", "solution": "echo 42 > answer.txt",
         "verify": "echo 'curl: (6) Could not resolve host: hx-tests.invalid'; exit 1"}
MISS = {"prompt": "WRITE: answer.txt 41\nTASK-MISS", "solution": "echo 42 > answer.txt", "verify": CHECK}


@pytest.mark.slow
def test_the_summary_counts_suspect_samples_and_broken_tasks(tmp_path: Path, mock_server) -> None:
    """Two runs, without and with preflight=oracle (a setting no -m sweep may vary), summarised on demand."""
    data = write_dataset(tmp_path / "v.jsonl", [GOOD, SOLUTION_WRONG, FETCH, MISS])
    for name in ("plain", "checked"):
        result = run_cli(tmp_path, f"run_name={name}", f"preflight={'oracle' if name == 'checked' else 'none'}",
                         f"dataset.path={data}", "sandbox=local", "verifier=command", "filters=none",
                         "distribution=terminal_only", "samples_per_prompt=2", f"model.base_url={mock_server.base_url}")
        assert result.returncode == 0, result.stderr
    outputs = tmp_path / "outputs"
    proc = subprocess.run([sys.executable, "-m", "hermes_exp.report", "--summary", str(outputs)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    jobs = {j["job"]: j for j in json.loads((outputs / "summary.json").read_text())["jobs"]}
    for name, job in jobs.items():  # the run's own statistics
        stats = json.loads((outputs / name / "statistics.json").read_text())
        v = stats["verification"]
        assert (job["broken"], job["suspect"], job["pass_rate_without_suspect"]) == \
               (stats["broken"], v["suspect"], v["pass_rate_without_suspect"])
    plain, checked = jobs["plain"], jobs["checked"]
    assert (plain["broken"], plain["suspect"], plain["pass_rate"], plain["pass_rate_without_suspect"]) == \
           (0, 2, 0.5, round(4 / 6, 6))
    assert (checked["broken"], checked["suspect"], checked["pass_rate"], checked["pass_rate_without_suspect"]) == \
           (4, 0, 0.5, 0.5)
    csv_rows = {r["job"]: r for r in csv.DictReader((outputs / "summary.csv").open())}
    assert [csv_rows[n][c] for n in ("plain", "checked")
            for c in ("broken", "suspect", "pass_rate_without_suspect")] == ["0", "2", "0.666667", "4", "0", "0.5"]
    assert "broken" in proc.stderr and "suspect (pass w/o)" in proc.stderr and "2 (66.7%)" in proc.stderr

    # pass@k without the suspect samples: FETCH's two samples are no draws of the agent's
    v = json.loads((outputs / "plain" / "statistics.json").read_text())["verification"]
    assert v["pass_at_k"] == v["pass_hat_k"] == {"1": 0.5, "2": 0.5}
    assert v["pass_at_k_without_suspect"] == v["pass_hat_k_without_suspect"] == {"1": round(2 / 3, 6),
                                                                                   "2": round(2 / 3, 6)}
