"""Counts past what a run can hold are refused at once (exit 2, naming the key, the value, the limit and
the fix) instead of hanging while every task is keyed: the real CLI, bounded in time and address space."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_exp.dataset import tasks as dataset_mod
from hermes_exp.dataset.tasks import open_dataset, scan
from hermes_exp.errors import ConfigError

MEMORY = 3 * 1024 ** 3  # bytes of address space the CLI may map: a billion task keys would need ~32 GB


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def run_bounded(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermes_exp.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=180, preexec_fn=_limited)


@pytest.mark.parametrize("override, key, value, limit", [
    ("samples_per_prompt=1000000000", "samples_per_prompt", "1,000,000,000", "10,000,000"),
    ("num_workers=100000", "num_workers", "100,000", "1,024"),
    ("executor.n_jobs=5000", "executor.n_jobs", "5,000", "1,024"),
])
def test_a_count_that_cannot_fit_is_refused_at_once(tmp_path: Path, override: str, key: str, value: str,
                                                    limit: str) -> None:
    done = run_bounded(tmp_path, "run_name=huge", override)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"{key}={value} is over the limit of {limit}" in done.stderr and "fix:" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "outputs" / "huge" / "ledger.db").exists()  # refused before any work


def test_rows_times_samples_past_the_limit_stop_the_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"p{i}"}) + "\n" for i in range(5)))
    monkeypatch.setattr(dataset_mod, "MAX_TASKS", 7)  # the real limit takes minutes of keying to reach
    assert len(scan(open_dataset(str(data)), "id", False, None, samples=1).indexed) == 5
    with pytest.raises(ConfigError, match=r"samples_per_prompt=2 x 4 rows of .*d.jsonl .* over the limit of"):
        scan(open_dataset(str(data)), "id", False, None, samples=2)
