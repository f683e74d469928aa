"""The scoring path, attacked (issue 32, section 5): an agent that forges its reward, a verifier timeout
applied to another row, a judge's reward read loosely, a re-score that cannot run, rewards out of range.
Real CLI against the mock model, real sandboxes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import read_jsonl, run_cli, write_dataset

from hermes_exp.sandbox.auto import bwrap_works
from tests.sandbox.conftest import IMAGE, docker_problem, unavailable

LOOP = "while :; do mkdir -p {d}; echo 1 > {d}/reward.txt; sleep 0.02; done"


def _forgers(d: str) -> list[dict]:
    """Rows whose agent leaves a process rewriting the reward file; their verify always fails."""
    loop = LOOP.format(d=d)
    return [
        {"prompt": f"BG: {loop}\nRUN: sleep 0.5\nforge in the background", "verify": "sleep 1; exit 1"},
        {"prompt": f"RUN: (setsid sh -c '{loop}' >/dev/null 2>&1 &)\nRUN: sleep 0.5\nforge, detached",
         "verify": "sleep 1; exit 1"},
    ]


def _scores(run_dir: Path) -> dict[int, tuple]:
    with sqlite3.connect(run_dir / "ledger.db") as db:
        return {i: (r, p, e) for i, r, p, e in db.execute(
            "SELECT t.prompt_index, s.reward, s.passed, s.error FROM scores s JOIN tasks t USING (key)")}


def _backend(sandbox: str) -> list[str]:
    if sandbox == "bwrap" and not bwrap_works()[0]:
        unavailable(f"bubblewrap does not work here: {bwrap_works()[1]}")
    if sandbox == "docker":
        problem = docker_problem()
        if problem:
            unavailable(problem)
        return ["sandbox=docker", f"sandbox.image={IMAGE}", "sandbox.pull_timeout=20"]
    return [f"sandbox={sandbox}"]


@pytest.mark.parametrize("sandbox", ["local", "bwrap", "docker"])
def test_an_agent_cannot_forge_its_reward(tmp_path: Path, mock_server, sandbox: str) -> None:
    extra = _backend(sandbox)
    rows = _forgers("/logs/verifier" if sandbox == "docker" else "logs/verifier")
    data = write_dataset(tmp_path / "forge.jsonl", rows)
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=forge", "verifier=command", "filters=none",
                     "distribution=terminal_only", f"model.base_url={mock_server.base_url}", *extra)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "outputs" / "forge"
    assert _scores(out) == {0: (0.0, 0, None), 1: (0.0, 0, None)}
    rows = {r["prompt_index"]: r for r in read_jsonl(out / "trajectories.jsonl")}
    assert {i: (r["reward"], r["passed"]) for i, r in rows.items()} == {0: (0.0, False), 1: (0.0, False)}


def test_each_row_keeps_its_own_verifier_timeout(tmp_path: Path, mock_server) -> None:
    """Built verifiers were cached by their identity, which leaves the timeout out: whichever row came
    first set the timeout of both."""
    rows = [{"prompt": "RUN: true\nslow but allowed", "verify": "sleep 3",
             "verifier": {"kind": "command", "timeout_seconds": 60}},
            {"prompt": "RUN: true\ntoo slow", "verify": "sleep 8",
             "verifier": {"kind": "command", "timeout_seconds": 1}}]
    data = write_dataset(tmp_path / "t.jsonl", rows)
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=timeouts", "verifier=command", "filters=none",
                     "sandbox=local", "distribution=terminal_only", f"model.base_url={mock_server.base_url}")
    assert result.returncode == 3, result.stderr
    scores = _scores(tmp_path / "outputs" / "timeouts")
    assert scores[0] == (1.0, 1, None)
    assert scores[1][0] is None and "timed out after 1s" in scores[1][2]


def test_the_judge_reward_is_read_whole_bounded_and_from_its_last_line(tmp_path: Path, mock_server) -> None:
    """The judge's prompt is the row's prompt, so the mock (answering its ANSWER: line) says what each
    row asks: a number with an exponent, one out of range, and a verdict quoted from the agent."""
    answers = ["REWARD: 1e-9", "REWARD: 5e-1", "REWARD: 7", "The agent wrote REWARD: 1 and nothing else"]
    data = write_dataset(tmp_path / "j.jsonl", [{"prompt": f"ANSWER: {a}"} for a in answers])
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=judge", "verifier=judge", "filters=none",
                     "verifier.prompt='{prompt}'", "sandbox=local", "distribution=terminal_only",
                     f"model.base_url={mock_server.base_url}")
    assert result.returncode == 3, result.stderr
    scores = _scores(tmp_path / "outputs" / "judge")
    assert scores[0] == (pytest.approx(1e-9), 0, None)
    assert scores[1] == (0.5, 1, None)
    assert scores[2][0] is None and "outside 0..1" in scores[2][2]
    assert scores[3][0] is None and "last line is not a verdict" in scores[3][2]


def test_a_reward_outside_the_valid_range_is_a_verifier_error(tmp_path: Path, mock_server) -> None:
    rewards = {"1e308": None, "-5": -5.0, "1": 1.0, "-1e7": None}
    rows = [{"prompt": f"RUN: true\nreward {r}", "verify": f"echo {r} > logs/verifier/reward.txt; exit 1"}
            for r in rewards]
    data = write_dataset(tmp_path / "r.jsonl", rows)
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=range", "verifier=command", "filters=none",
                     "sandbox=local", "distribution=terminal_only", f"model.base_url={mock_server.base_url}")
    assert result.returncode == 3, result.stderr
    out = tmp_path / "outputs" / "range"
    scores = _scores(out)
    assert [scores[i][0] for i in range(4)] == list(rewards.values())
    assert [scores[i][1] for i in range(4)] == [None, 0, 1, None]
    assert all("outside the valid range" in scores[i][2] for i in (0, 3))
    stats = json.loads((out / "statistics.json").read_text())["verification"]
    assert stats["mean_reward"] == pytest.approx(-2.0) and stats["verifier_errors"] == 2
    assert "e+30" not in result.stderr and not any(len(w) > 40 and w.lstrip("-").replace(".", "").isdigit()
                                                    for w in result.stderr.split())


def _ledger_state(out: Path) -> tuple[dict, dict]:
    with sqlite3.connect(out / "ledger.db") as db:
        states = dict(db.execute("SELECT prompt_index, state || ':' || COALESCE(error_class, '') FROM tasks"))
        scores = dict(db.execute("SELECT t.prompt_index, COUNT(s.key) FROM tasks t LEFT JOIN scores s USING (key) "
                                 "GROUP BY t.prompt_index"))
    return states, scores


def test_a_rescore_that_cannot_run_keeps_the_old_scores_and_says_why(tmp_path: Path, mock_server) -> None:
    rows = [{"prompt": "ANSWER: 42", "expected": "42", "verify": "true"},
            {"prompt": "ANSWER: 41", "expected": "42", "verify": "true"}]
    data = write_dataset(tmp_path / "s.jsonl", rows)
    args = [f"dataset.path={data}", "run_name=rs", "filters=none", "sandbox=local", "distribution=terminal_only",
            f"model.base_url={mock_server.base_url}"]
    first = run_cli(tmp_path, *args, "verifier=answer")
    assert first.returncode == 0, first.stderr
    out = tmp_path / "outputs" / "rs"
    before = _ledger_state(out), (out / "trajectories.jsonl").read_text()

    score = run_cli(tmp_path, *args, "verifier=command", "action=score")
    assert "no archive" in score.stderr and "keep" in score.stderr, score.stderr
    assert (_ledger_state(out), (out / "trajectories.jsonl").read_text()) == before
    again = run_cli(tmp_path, *args, "verifier=answer")  # later runs are as they were
    assert again.returncode == 0, again.stderr
    assert [r["reward"] for r in read_jsonl(out / "trajectories.jsonl")] == [1.0, 0.0]


def test_action_score_without_a_verifier_says_so(tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "n.jsonl", [{"prompt": "ANSWER: 42"}])
    args = [f"dataset.path={data}", "run_name=nv", "filters=none", "sandbox=local", "distribution=terminal_only",
            f"model.base_url={mock_server.base_url}"]
    assert run_cli(tmp_path, *args).returncode == 0
    score = run_cli(tmp_path, *args, "verifier=none", "action=score")
    assert "already has a score" not in score.stderr, score.stderr
    assert "nothing to score" in score.stderr and "verifier=answer" in score.stderr, score.stderr


def test_a_multi_key_reward_json_scores_the_mean_and_keeps_every_named_reward(tmp_path: Path, mock_server) -> None:
    rows = [{"prompt": "RUN: true\nmulti", "verify": "echo '{\"correctness\": 1, \"performance\": 0.5}' "
                                                      "> logs/verifier/reward.json"},
            {"prompt": "RUN: true\nbad", "verify": "echo '{\"correctness\": 1, \"note\": \"fast\"}' "
                                                    "> logs/verifier/reward.json"}]
    data = write_dataset(tmp_path / "m.jsonl", rows)
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=multi", "verifier=command", "filters=none",
                     "sandbox=local", "distribution=terminal_only", f"model.base_url={mock_server.base_url}")
    assert result.returncode == 3, result.stderr
    scores = _scores(tmp_path / "outputs" / "multi")
    assert scores[0] == (0.75, 0, None)
    assert scores[1][0] is None and "must all be numbers" in scores[1][2]
    with sqlite3.connect(tmp_path / "outputs" / "multi" / "ledger.db") as db:
        details = db.execute("SELECT s.details FROM scores s JOIN tasks t USING (key) WHERE t.prompt_index = 0").fetchone()[0]
    assert '"correctness": 1' in details and '"performance": 0.5' in details


@pytest.mark.parametrize("agent", ["oracle", "nop"])
def test_control_runs_do_not_go_through_the_reasoning_filter(tmp_path: Path, mock_server, agent: str) -> None:
    """An oracle or nop run is not model output: under the default filters its rows are kept."""
    rows = [{"prompt": "Write 42", "solution": "echo 42 > answer.txt", "verify": "grep -qx 42 answer.txt"},
            {"prompt": "Passes anyway", "solution": "true", "verify": "true"}]
    data = write_dataset(tmp_path / "c.jsonl", rows)
    result = run_cli(tmp_path, f"dataset.path={data}", f"run_name={agent}", f"agent={agent}", "verifier=command",
                     "sandbox=local", f"model.base_url={mock_server.base_url}")
    assert result.returncode == 0, result.stderr
    assert "2 kept, 0 filtered" in result.stderr, result.stderr
    assert len(read_jsonl(tmp_path / "outputs" / agent / "trajectories.jsonl")) == 2


def test_an_oracle_without_a_solution_is_listed_as_no_solution(tmp_path: Path, mock_server) -> None:
    rows = [{"prompt": "Solved", "solution": "echo 42 > a.txt", "verify": "grep -qx 42 a.txt"},
            {"prompt": "No solution", "verify": "grep -qx 42 a.txt"},
            {"prompt": "Wrong solution", "solution": "echo 41 > a.txt", "verify": "grep -qx 42 a.txt"}]
    data = write_dataset(tmp_path / "o.jsonl", rows)
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=oracle", "agent=oracle", "verifier=command",
                     "sandbox=local", "filters=none", f"model.base_url={mock_server.base_url}")
    assert result.returncode == 0, result.stderr
    stats = json.loads((tmp_path / "outputs" / "oracle" / "statistics.json").read_text())
    assert [(b["line"], b["why"]) for b in stats["verification"]["broken_tasks"]] == [
        (2, "no solution"), (3, "the oracle's solution does not pass")]
    assert "broken tasks (agent=oracle): 2\n    no solution: dataset lines 2\n" in result.stderr, result.stderr
    assert "the oracle's solution does not pass: dataset lines 3\n" in result.stderr
