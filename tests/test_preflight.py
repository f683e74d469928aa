"""preflight=oracle through the real CLI and the mock model: each distinct environment's reference solution
and verifier run once before any model call; a broken task is its own class, never sent to the model,
listed with its verifier's output and kept out of the pass rates; verdicts are kept in the ledger by the
environment's content, so a later run checks only what changed."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import agent_bodies, run_cli, user_prompt, write_dataset
from test_harbor import SOLVE_SH, engine, make_task, nonce  # noqa: F401 - the engine and nonce fixtures

from tests.sandbox.conftest import IMAGE

GOOD = {"prompt": "WRITE: answer.txt 42\nTASK-GOOD: put 42 in answer.txt", "solution": "echo 42 > answer.txt",
        "verify": "grep -qx 42 answer.txt"}
WRONG = {"prompt": "WRITE: answer.txt 42\nTASK-WRONG: put 42 in answer.txt", "solution": "echo 41 > answer.txt",
         "verify": "echo checking answer.txt; grep -qx 42 answer.txt"}
NOSTART = {"prompt": "RUN: true\nTASK-NOSTART: anything", "verify": "hx-no-such-test-runner --all"}
NOP_ZERO = {"prompt": "RUN: true\nTASK-NOP: make done.txt", "verify": "test -f done.txt"}


def _prompts(tmp: Path) -> list[str]:
    """The task prompts the mock model received (one per agent turn)."""
    return [line for body in agent_bodies(tmp / "requests.jsonl")
            for line in user_prompt(body).splitlines() if line.startswith("TASK-")]


def _run(tmp: Path, data: Path, base_url: str, *extra: str):
    return run_cli(tmp, f"dataset.path={data}", "run_name=pf", "sandbox=local", "verifier=command", "filters=none",
                   "preflight=oracle", f"model.base_url={base_url}", *extra)


def _environments(tmp: Path) -> dict[str, str]:
    with sqlite3.connect(tmp / "outputs" / "pf" / "ledger.db") as db:
        return dict(db.execute("SELECT task, verdict FROM environments"))


def test_broken_tasks_are_never_sent_to_the_model_and_counted_apart(tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "d.jsonl", [GOOD, WRONG, NOSTART, NOP_ZERO])
    first = _run(tmp_path, data, mock_server.base_url)
    assert first.returncode == 0, first.stderr  # broken tasks are the dataset's fault, not failed tasks
    err = first.stderr
    assert "preflight=oracle: 4 environment(s) for 4 task(s): checking 4\n" in err
    assert "  2 held up, 2 broken (never sent to the model)\n" in err
    assert "broken: dataset line 2: the reference solution does not pass: reward 0" in err
    assert "broken: dataset line 3: no solution; the verifier cannot start on the untouched environment (exit 127" in err
    assert set(_prompts(tmp_path)) == {"TASK-GOOD: put 42 in answer.txt", "TASK-NOP: make done.txt"}
    stats = json.loads((tmp_path / "outputs" / "pf" / "statistics.json").read_text())
    assert (stats["kept"], stats["failed"], stats["broken"], stats["pending"]) == (2, 0, 2, 0)
    assert [b["line"] for b in stats["broken_tasks"]] == [2, 3] and "broken" not in stats["errors"]
    assert "checking answer.txt" in stats["broken_tasks"][0]["tail"]  # the verifier's own output
    assert "not found" in stats["broken_tasks"][1]["tail"]
    assert (stats["verification"]["scored"], stats["verification"]["passed"]) == (2, 1)  # GOOD 1, NOP 0
    assert "2 kept, 0 filtered, 0 failed, 2 broken, 0 pending of 4 prompts" in err
    assert "broken tasks (preflight=oracle): 2, never sent to the model" in err and "      | checking answer.txt" in err
    assert _environments(tmp_path) == {"dataset line 1": "ok", "dataset line 2": "broken",
                                       "dataset line 3": "broken", "dataset line 4": "ok"}

    # More samples of the same rows: the environments are known, none is checked again, and the new
    # samples of the broken rows are recorded broken without a model call.
    more = _run(tmp_path, data, mock_server.base_url, "samples_per_prompt=2")
    assert more.returncode == 0, more.stderr
    assert "preflight=oracle: 4 environment(s) for 4 task(s): checking 0, 4 checked by an earlier run (ledger)" \
        in more.stderr
    assert set(_prompts(tmp_path)) == {"TASK-GOOD: put 42 in answer.txt", "TASK-NOP: make done.txt"}
    stats = json.loads((tmp_path / "outputs" / "pf" / "statistics.json").read_text())
    assert (stats["kept"], stats["broken"], stats["failed"]) == (4, 4, 0)

    # The task fixed (its solution edited): a new environment, checked, and run by the model.
    fixed = {**WRONG, "solution": "echo 42 > answer.txt"}
    write_dataset(data, [GOOD, fixed, NOSTART, NOP_ZERO])
    again = _run(tmp_path, data, mock_server.base_url, "samples_per_prompt=2")
    assert again.returncode == 0, again.stderr
    assert "preflight=oracle: 1 environment(s) for 2 task(s): checking 1\n  1 held up, 0 broken" in again.stderr
    assert "TASK-WRONG: put 42 in answer.txt" in _prompts(tmp_path)
    stats = json.loads((tmp_path / "outputs" / "pf" / "statistics.json").read_text())
    assert (stats["kept"], stats["broken"]) == (6, 2) and stats["verification"]["passed"] == 4


def test_a_pilot_says_how_many_environments_held_up(tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [GOOD, WRONG, NOP_ZERO])
    checked = _run(tmp_path, data, mock_server.base_url, "pilot=2")
    assert checked.returncode == 0, checked.stderr
    assert "environments: 1 of 2 pilot task(s) held up, 1 broken" in checked.stderr  # rows 1 and 2 of 3
    pilot = json.loads((tmp_path / "outputs" / "pf" / "pilot.json").read_text())
    assert pilot["environments"] == {"checked": True, "held_up": 1, "broken": 1} and pilot["settled"] == 1
    plain = run_cli(tmp_path, f"dataset.path={data}", "run_name=plain", "sandbox=local", "verifier=command",
                    "filters=none", "pilot=1", f"model.base_url={mock_server.base_url}")
    assert plain.returncode == 0, plain.stderr
    assert "environments: not checked (add preflight=oracle" in plain.stderr


def test_a_misspelt_preflight_is_a_config_error(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "e.jsonl", [GOOD])
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=e", "preflight=orcale")
    assert result.returncode == 2
    assert "preflight='orcale'" in result.stderr and "none, oracle" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.docker
@pytest.mark.slow
def test_harbor_tasks_built_by_the_engine_are_checked_first(tmp_path: Path, mock_server, engine: Any,
                                                            nonce: str) -> None:
    """Real Harbor task folders, images built from their Dockerfiles: one whose solution passes runs; one
    whose solution is wrong and one without a solution whose test.sh cannot start are broken, named by
    their folders, and never reach the model."""
    root = tmp_path / "tasks"
    image = f"FROM {IMAGE}\nLABEL hx.test.nonce={nonce}\nWORKDIR /app\n"
    make_task(root, "passes", "TASK-PASSES\nRUN: echo hello > /app/out.txt\n", image)
    wrong = make_task(root, "wrong-solution", "TASK-WRONG\nRUN: echo hello > /app/out.txt\n", image)
    (wrong / "solution" / "solve.sh").write_text("#!/bin/sh\necho bye > /app/out.txt\n")
    missing = make_task(root, "no-runner", "TASK-NORUNNER\nRUN: true\n", image)
    shutil.rmtree(missing / "solution")
    (missing / "tests" / "test.sh").write_text("#!/bin/sh\nhx-missing-pytest /tests/test_outputs.py\n")
    args = [f"dataset.path={root}", "run_name=pf", "sandbox=docker", f"sandbox.image={IMAGE}", "filters=none",
            "distribution=terminal_only", "num_workers=2", "preflight=oracle", f"model.base_url={mock_server.base_url}"]
    first = run_cli(tmp_path, *args, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "checking 3\n  1 held up, 2 broken (never sent to the model)\n" in first.stderr
    assert "broken: wrong-solution: the reference solution does not pass: reward 0" in first.stderr
    assert "broken: no-runner: no solution; the verifier cannot run on the untouched environment" in first.stderr
    assert set(_prompts(tmp_path)) == {"TASK-PASSES"}
    stats = json.loads((tmp_path / "outputs" / "pf" / "statistics.json").read_text())
    assert (stats["kept"], stats["broken"], stats["failed"], stats["verification"]["passed"]) == (1, 2, 0, 1)
    assert "hx-missing-pytest: not found" in stats["broken_tasks"][0]["tail"] + stats["broken_tasks"][1]["tail"]

    (wrong / "solution" / "solve.sh").write_text(SOLVE_SH)  # fixed: the folder's digest changes
    fixed = run_cli(tmp_path, *args, timeout=300)
    assert fixed.returncode == 0, fixed.stderr
    assert "preflight=oracle: 1 environment(s) for 1 task(s): checking 1\n  1 held up, 0 broken" in fixed.stderr
    assert "TASK-WRONG" in _prompts(tmp_path)
    stats = json.loads((tmp_path / "outputs" / "pf" / "statistics.json").read_text())
    assert (stats["kept"], stats["broken"], stats["verification"]["passed"]) == (2, 1, 2)
