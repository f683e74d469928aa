"""Verified samples through the real CLI and the mock model: command verifiers in the sample's own
sandbox (local, bwrap, docker), answers, the scores table, N samples per prompt, failed verifications
retried alone."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import read_jsonl, request_count, run_cli, write_dataset

from hermes_exp.store.metrics import pass_at_k, pass_hat_k
from tests.sandbox.conftest import IMAGE, docker_problem, unavailable
from hermes_exp.sandbox.auto import bwrap_works

TEST_SH = "#!/bin/sh\ngrep -qx 42 answer.txt\n"


def tasks(d: str) -> list[tuple[dict, float]]:
    """(row, expected reward); `d` is the backend's reward directory. The mock follows WRITE:/RUN:
    lines, so its plan decides who passes."""
    return [
        ({"prompt": "WRITE: answer.txt 42\nPut 42 in answer.txt", "tests": {"tests/test.sh": TEST_SH},
          "verify": "./tests/test.sh"}, 1.0),
        ({"prompt": "WRITE: answer.txt 41\nPut 42 in answer.txt", "tests": {"tests/test.sh": TEST_SH},
          "verify": "sh tests/test.sh"}, 0.0),
        # The agent tries to read the tests (not there yet) and to pre-write a reward: both must fail.
        ({"prompt": f"RUN: cat tests/test.sh\nRUN: mkdir -p {d} && echo 1 > {d}/reward.txt\nCheat",
          "tests": {"tests/test.sh": TEST_SH}, "verify": "sh tests/test.sh"}, 0.0),
        # A reward file written by the verify command wins over its exit status.
        ({"prompt": "RUN: echo hi\nSay hi", "verify": f"echo 0.25 > {d}/reward.txt; exit 1"}, 0.25),
        ({"prompt": "RUN: true\nfixtures", "files": {"data/in.txt": "fixture"}, "setup": "cp data/in.txt data/copy.txt",
          "verify": f"echo '{{\"reward\": 0.5, \"other\": 1}}' > {d}/reward.json; test -f data/copy.txt"}, 0.5),
        ({"prompt": "What is 6 times 7?\nANSWER: The answer is 42.", "verifier": "answer", "expected": "42",
          "match": "numeric"}, 1.0),
    ]


HOST_TASKS, CONTAINER_TASKS = tasks("logs/verifier"), tasks("/logs/verifier")


def _args(tmp: Path, run_name: str, base_url: str, *extra: str) -> list[str]:
    rows = CONTAINER_TASKS if run_name == "docker" else HOST_TASKS
    data = write_dataset(tmp / f"{run_name}.jsonl", [row for row, _ in rows])
    return [f"dataset.path={data}", f"run_name={run_name}", "verifier=command", "filters=none",
            "distribution=default", f"model.base_url={base_url}", *extra]


def _scores(run_dir: Path) -> dict[int, tuple]:
    with sqlite3.connect(run_dir / "ledger.db") as db:
        return {i: (r, p, e) for i, r, p, e in db.execute(
            "SELECT t.prompt_index, s.reward, s.passed, s.error FROM scores s JOIN tasks t USING (key)")}


def _check_rewards(tmp: Path, run_name: str) -> None:
    out = tmp / "outputs" / run_name
    TASKS = CONTAINER_TASKS if run_name == "docker" else HOST_TASKS
    rows = {r["prompt_index"]: r for r in read_jsonl(out / "trajectories.jsonl")}
    assert {i: r["reward"] for i, r in rows.items()} == {i: want for i, (_, want) in enumerate(TASKS)}
    assert {i: r["passed"] for i, r in rows.items()} == {i: want >= 1.0 for i, (_, want) in enumerate(TASKS)}
    assert all(r["sample"] == 0 for r in rows.values())
    cat = json.loads(rows[2]["conversations"][3]["value"].split("\n")[1])["content"]
    assert cat["exit_code"] != 0 and "No such file" in cat["output"]
    planted = json.loads(rows[2]["conversations"][5]["value"].split("\n")[1])["content"]
    assert planted["exit_code"] == 0  # the agent did plant a reward file; the verifier removed it
    assert _scores(out)[3][2] is None
    stats = json.loads((out / "statistics.json").read_text())["verification"]
    assert stats["scored"] == len(TASKS) and stats["passed"] == 2 and stats["verifier_errors"] == 0
    assert stats["mean_reward"] == pytest.approx(sum(w for _, w in TASKS) / len(TASKS), abs=1e-6)


@pytest.mark.parametrize("sandbox", ["local", "bwrap"])
def test_command_rewards_on_host_sandboxes(tmp_path: Path, mock_server, sandbox: str) -> None:
    if sandbox == "bwrap" and not bwrap_works()[0]:
        unavailable(f"bubblewrap does not work here: {bwrap_works()[1]}")
    result = run_cli(tmp_path, *_args(tmp_path, sandbox, mock_server.base_url, f"sandbox={sandbox}"))
    assert result.returncode == 0, result.stderr
    _check_rewards(tmp_path, sandbox)


@pytest.mark.docker
@pytest.mark.slow
def test_command_rewards_in_containers(tmp_path: Path, mock_server) -> None:
    problem = docker_problem()
    if problem:
        unavailable(problem)
    result = run_cli(tmp_path, *_args(tmp_path, "docker", mock_server.base_url, "sandbox=docker",
                                      f"sandbox.image={IMAGE}", "sandbox.pull_timeout=20"))
    assert result.returncode == 0, result.stderr
    _check_rewards(tmp_path, "docker")


def test_verifier_timeout_is_retried_alone(tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "t.jsonl", [{"prompt": "RUN: true\nslow check", "verify": "sleep 3"},
                                                {"prompt": "RUN: true\nquick check", "verify": "true"}])
    args = [f"dataset.path={data}", "run_name=slow", "verifier=command", "sandbox=local", "filters=none",
            f"model.base_url={mock_server.base_url}"]
    first = run_cli(tmp_path, *args, "verifier.timeout_seconds=0.5")
    assert first.returncode == 3, first.stderr
    assert "verifier" in first.stderr
    out = tmp_path / "outputs" / "slow"
    with sqlite3.connect(out / "ledger.db") as db:
        states = dict(db.execute("SELECT prompt_index, state || ':' || COALESCE(error_class, '') FROM tasks"))
    assert states == {0: "error:verifier", 1: "done:"}
    assert [r["prompt_index"] for r in read_jsonl(out / "trajectories.jsonl")] == [1]
    stats = json.loads((out / "statistics.json").read_text())
    assert stats["verification"]["verifier_errors"] == 1 and stats["errors"] == {"verifier": 1}
    calls = request_count(tmp_path / "requests.jsonl")

    second = run_cli(tmp_path, *args, "verifier.timeout_seconds=30")
    assert second.returncode == 0, second.stderr
    assert request_count(tmp_path / "requests.jsonl") == calls  # the agent was not run again
    rows = read_jsonl(out / "trajectories.jsonl")
    assert [(r["prompt_index"], r["reward"]) for r in rows] == [(0, 1.0), (1, 1.0)]


def test_samples_per_prompt_grows_and_shrinks(tmp_path: Path, mock_server) -> None:
    # With toolsets drawn per sample (terminal and file half the time each), only samples that got
    # the file tool can WRITE the answer: pass counts differ between samples of one prompt.
    rows = [{"prompt": f"WRITE: answer.txt 42\nTask {i}", "verify": "grep -qx 42 answer.txt"} for i in range(3)]
    data = write_dataset(tmp_path / "s.jsonl", rows)
    args = [f"dataset.path={data}", "run_name=s", "verifier=command", "sandbox=local", "filters=none",
            "distribution=balanced", f"model.base_url={mock_server.base_url}"]
    assert run_cli(tmp_path, *args, "samples_per_prompt=3").returncode == 0
    out = tmp_path / "outputs" / "s"
    with sqlite3.connect(out / "ledger.db") as db:
        first = set(db.execute("SELECT key, finished_at FROM tasks"))
    assert len(first) == 9
    five = run_cli(tmp_path, *args, "samples_per_prompt=5")
    assert five.returncode == 0, five.stderr
    assert "6 planned now" in five.stderr  # exactly 2 more samples per prompt
    with sqlite3.connect(out / "ledger.db") as db:
        now = set(db.execute("SELECT key, finished_at FROM tasks"))
    assert first <= now and len(now) == 15
    trajectories = read_jsonl(out / "trajectories.jsonl")
    assert sorted((t["prompt_index"], t["sample"]) for t in trajectories) == [(i, s) for i in range(3) for s in range(5)]
    for t in trajectories:
        assert t["passed"] == ("file" in t["toolsets_used"])
    per_prompt = {i: sum(t["passed"] for t in trajectories if t["prompt_index"] == i) for i in range(3)}
    stats = json.loads((out / "statistics.json").read_text())["verification"]
    for k in range(1, 6):
        want = sum(pass_at_k(5, c, k) for c in per_prompt.values()) / 3
        assert stats["pass_at_k"][str(k)] == pytest.approx(want, abs=1e-6)
        assert stats["pass_hat_k"][str(k)] == pytest.approx(sum(pass_hat_k(5, c, k) for c in per_prompt.values()) / 3,
                                                            abs=1e-6)
    assert len({t["toolsets_used"].__repr__() for t in trajectories if t["prompt_index"] == 0}) > 1

    calls = request_count(tmp_path / "requests.jsonl")
    two = run_cli(tmp_path, *args, "samples_per_prompt=2")
    assert two.returncode == 0 and request_count(tmp_path / "requests.jsonl") == calls
    assert sorted(t["sample"] for t in read_jsonl(out / "trajectories.jsonl")) == [0, 0, 0, 1, 1, 1]
    with sqlite3.connect(out / "ledger.db") as db:
        assert db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0] == 15  # hidden, never deleted


def test_pass_at_k_by_hand() -> None:
    # n=5 samples, c=2 correct: pass@1 = 2/5; pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10; pass@4 = 1 (only 3 wrong)
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_at_k(5, 2, 4) == 1.0
    assert pass_hat_k(5, 2, 2) == pytest.approx(1 / 10)
    assert pass_hat_k(5, 2, 3) == 0.0


def test_bad_row_verifier_is_refused_with_its_line(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "bad.jsonl", [{"prompt": "ok"}, {"prompt": "x", "verifier": "nosuch"},
                                                  {"prompt": "y", "tests": 3}])
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=bad")
    assert result.returncode == 2
    assert f"{data}:2: unknown verifier 'nosuch'" in result.stderr and "answer" in result.stderr
    assert f"{data}:3: \"tests\" must be a folder path" in result.stderr
    lacking = run_cli(tmp_path, f"dataset.path={data}", "run_name=bad2", "verifier=command", "dataset.skip_invalid=false")
    assert lacking.returncode == 2 and f"{data}:1: verifier=command needs the row's \"verify\"" in lacking.stderr


def test_a_verifier_flag_that_is_not_a_boolean_is_refused(tmp_path: Path, mock_server) -> None:
    """`verifier.case_sensitive=no` is the string "no" to Hydra and a CSV column's `false` is the string
    "false": bool() took both for true and compared every answer case-sensitively without a word. The
    run's option is exit 2 before any work; a row's own option is a bad row, reported with its line."""
    data = write_dataset(tmp_path / "v.jsonl", [{"prompt": "ANSWER: Paris", "expected": "paris"}])
    args = [f"dataset.path={data}", "sandbox=local", "verifier=answer", f"model.base_url={mock_server.base_url}"]
    result = run_cli(tmp_path, *args, "run_name=vf", "verifier.case_sensitive=no")
    assert result.returncode == 2, result.stderr
    assert "verifier.case_sensitive='no' must be true, false or null" in result.stderr
    assert "set verifier.case_sensitive=true or verifier.case_sensitive=false" in result.stderr
    assert not (tmp_path / "outputs" / "vf" / "ledger.db").exists()
    for bad, says in (("verifier.pass_threshold=high", "verifier.pass_threshold='high' must be a number"),
                      ("verifier.rel_tol=-1", "verifier.rel_tol=-1 must be a number >= 0")):
        result = run_cli(tmp_path, *args, "run_name=vf", bad)
        assert result.returncode == 2 and says in result.stderr, result.stderr
    rows = write_dataset(tmp_path / "rows.jsonl", [{"prompt": "ANSWER: Paris", "expected": "paris"},
                                                   {"prompt": "ANSWER: Paris", "expected": "paris", "case_sensitive": "false"}])
    result = run_cli(tmp_path, f"dataset.path={rows}", *args[1:], "run_name=vr")
    assert result.returncode == 2 and f"{rows}:2: verifier.case_sensitive='false' must be true" in result.stderr
    assert request_count(tmp_path / "requests.jsonl") == 0
    result = run_cli(tmp_path, f"dataset.path={rows}", *args[1:], "run_name=vr", "dataset.skip_invalid=true")
    assert result.returncode == 0, result.stderr
    [kept] = read_jsonl(tmp_path / "outputs" / "vr" / "trajectories.jsonl")
    assert kept["reward"] == 1.0 and kept["passed"] is True  # "Paris" against "paris": not case-sensitive


def _calls(tmp: Path) -> int:
    return request_count(tmp / "requests.jsonl")


def test_new_verifier_then_action_score_makes_no_model_call(tmp_path: Path, mock_server) -> None:
    rows = [{"prompt": "RUN: echo 42\nANSWER: 42", "expected": "42", "checks": {"tool_called": "terminal"}},
            {"prompt": "ANSWER: 41", "expected": "42", "checks": {"tool_called": "terminal", "max_turns": 3}}]
    data = write_dataset(tmp_path / "a.jsonl", rows)
    base = [f"dataset.path={data}", "run_name=a", "sandbox=local", "filters=none", f"model.base_url={mock_server.base_url}"]
    assert run_cli(tmp_path, *base).returncode == 0
    out = tmp_path / "outputs" / "a"
    assert [r["reward"] for r in read_jsonl(out / "trajectories.jsonl")] == [None, None]
    calls = _calls(tmp_path)
    for verifier, want in (("answer", [1.0, 0.0]), ("checks", [1.0, 0.5])):
        scored = run_cli(tmp_path, *base, f"verifier={verifier}", "action=score")
        assert scored.returncode == 0, scored.stderr
        assert "2 sample(s) verified without the agent" in scored.stderr
        assert [r["reward"] for r in read_jsonl(out / "trajectories.jsonl")] == want
    assert _calls(tmp_path) == calls
    with sqlite3.connect(out / "ledger.db") as db:
        assert sorted(db.execute("SELECT kind, COUNT(*) FROM scores GROUP BY kind")) == [("answer", 2), ("checks", 2)]
    again = run_cli(tmp_path, *base, "verifier=answer", "action=score")  # already scored: nothing to do
    assert again.returncode == 0 and "already has a score" in again.stderr
    # filters=verified keeps the passing sample only; no model call either
    kept = run_cli(tmp_path, *base, "verifier=answer", "filters=verified", "action=export")
    assert kept.returncode == 0, kept.stderr
    assert [r["prompt_index"] for r in read_jsonl(out / "trajectories.jsonl")] == [0]
    assert _calls(tmp_path) == calls


def test_command_rescored_in_a_fresh_sandbox_from_its_archive(tmp_path: Path, mock_server) -> None:
    rows = [{"prompt": "WRITE: answer.txt 42\nanswer", "verify": "pwd; grep -qx 42 answer.txt"},
            {"prompt": "RUN: true\nno answer", "verify": "pwd; grep -qx 42 answer.txt"}]
    data = write_dataset(tmp_path / "k.jsonl", rows)
    base = [f"dataset.path={data}", "run_name=k", "sandbox=local", "filters=none", "verifier=command",
            f"model.base_url={mock_server.base_url}", "verifier.keep_workdir=true"]
    assert run_cli(tmp_path, *base).returncode == 0
    out = tmp_path / "outputs" / "k"
    assert len(list((out / "archives").glob("*.tar.gz"))) == 2

    def details() -> list[str]:
        with sqlite3.connect(out / "ledger.db") as db:
            return [d for (d,) in db.execute("SELECT s.details FROM scores s JOIN tasks t USING (key) ORDER BY t.prompt_index")]

    before = details()
    calls = _calls(tmp_path)
    again = run_cli(tmp_path, *base, "action=score", "resume.redo_all=true")
    assert again.returncode == 0, again.stderr
    assert _calls(tmp_path) == calls
    after = details()
    assert [r["reward"] for r in read_jsonl(out / "trajectories.jsonl")] == [1.0, 0.0]
    for old, new in zip(before, after):
        old_dir, new_dir = old.splitlines()[1], new.splitlines()[1]  # `pwd` of each verification
        assert old_dir != new_dir and not Path(old_dir).exists() and not Path(new_dir).exists()
    stats = json.loads((out / "statistics.json").read_text())
    assert stats["verification"]["archives"] == 2 and stats["verification"]["archive_bytes"] > 0


def test_selection_best_of_n_splits_and_report(tmp_path: Path, mock_server) -> None:
    verify = ("test -f answer.txt || exit 1; if [ -f marks ]; then echo 1 > logs/verifier/reward.txt; "
              "else echo 0.5 > logs/verifier/reward.txt; fi")
    rows = [{"prompt": f"RUN: touch marks\nWRITE: answer.txt 42\nTask {i}", "verify": verify} for i in range(3)]
    data = write_dataset(tmp_path / "b.jsonl", rows)
    base = [f"dataset.path={data}", "run_name=eval/b", "sandbox=local", "filters=none", "verifier=command",
            "verifier.pass_threshold=0.5", "distribution=balanced", "samples_per_prompt=4",
            f"model.base_url={mock_server.base_url}"]
    first = run_cli(tmp_path, *base, "outputs.splits=true")
    assert first.returncode == 0, first.stderr
    out = tmp_path / "outputs" / "eval" / "b"
    every = read_jsonl(out / "trajectories.jsonl")
    assert len(every) == 12
    passed, failed = read_jsonl(out / "passed.jsonl"), read_jsonl(out / "failed.jsonl")
    assert sorted((r["prompt_index"], r["sample"]) for r in passed) == sorted(
        (r["prompt_index"], r["sample"]) for r in every if r["passed"])
    assert len(passed) + len(failed) == 12 and all(r["passed"] is False for r in failed)
    best = {}
    for r in every:  # by hand: highest reward among passing samples, then fewer turns, then lower sample
        if r["passed"]:
            rank = (-r["reward"], r["api_calls"], r["sample"])
            if r["prompt_index"] not in best or rank < best[r["prompt_index"]][0]:
                best[r["prompt_index"]] = (rank, r["sample"])
    calls = _calls(tmp_path)
    chosen = run_cli(tmp_path, *base, "selection=best_of_n", "action=export")
    assert chosen.returncode == 0, chosen.stderr
    rows_best = read_jsonl(out / "trajectories.jsonl")
    assert {r["prompt_index"]: r["sample"] for r in rows_best} == {i: s for i, (_, s) in best.items()}
    assert sum(len(read_jsonl(b)) for b in out.glob("batch_*.jsonl")) == len(rows_best)
    assert run_cli(tmp_path, *base, "selection=passed", "action=export").returncode == 0
    assert len(read_jsonl(out / "trajectories.jsonl")) == len(passed)
    assert not (out / "passed.jsonl").exists()  # splits are off again
    assert _calls(tmp_path) == calls

    # A second run whose agent cannot write files (the terminal toolset alone; the mock writes files with
    # write_file): the report shows both pass rates side by side.
    other = [a.replace("eval/b", "eval/a") for a in base if a != "distribution=balanced"]
    other += ["distribution=terminal_only", "distribution.toolsets.file=0"]
    assert run_cli(tmp_path, *other).returncode == 0
    pytest.importorskip("plotly")
    from hermes_exp.report.render import build_report

    html = build_report(tmp_path / "outputs" / "eval").read_text()
    stats = json.loads((out / "statistics.json").read_text())["verification"]
    assert 'class="pass-rate">0.0%' in html
    assert f'class="pass-rate">{100 * stats["pass_rate"]:.1f}%' in html and "chart-verified" in html


def test_oracle_and_nop_control_runs_list_broken_tasks(tmp_path: Path, mock_server) -> None:
    rows = [{"prompt": "Write 42 to answer.txt", "solution": "echo 42 > answer.txt", "verify": "grep -qx 42 answer.txt"},
            {"prompt": "Broken: the test checks another file", "solution": "echo 42 > answer.txt",
             "verify": "grep -qx 42 other.txt"},
            {"prompt": "Broken: passes without work", "solution": "echo 42 > answer.txt", "verify": "true"},
            {"prompt": "Solution files", "solution": "sh solution/solve.sh",
             "solution_files": {"solution/solve.sh": "echo 7 > n.txt"}, "verify": "grep -qx 7 n.txt"}]
    data = write_dataset(tmp_path / "o.jsonl", rows)
    want = {"oracle": ([1.0, 0.0, 1.0, 1.0], [2]), "nop": ([0.0, 0.0, 1.0, 0.0], [3])}
    for agent, (rewards, broken_lines) in want.items():
        result = run_cli(tmp_path, f"dataset.path={data}", f"run_name={agent}", f"agent={agent}", "verifier=command",
                         "sandbox=local", "filters=none", f"model.base_url={mock_server.base_url}")
        assert result.returncode == 0, result.stderr
        out = tmp_path / "outputs" / agent
        assert [r["reward"] for r in read_jsonl(out / "trajectories.jsonl")] == rewards
        stats = json.loads((out / "statistics.json").read_text())
        assert stats["api_calls"] == 0
        assert [b["line"] for b in stats["verification"]["broken_tasks"]] == broken_lines
        assert f"broken tasks (agent={agent}): 1\n" in result.stderr
        assert f": dataset lines {broken_lines[0]}\n" in result.stderr
    assert request_count(tmp_path / "requests.jsonl") == 0  # control runs make no model call



def test_max_tool_errors_counts_a_command_that_exited_non_zero(tmp_path: Path, mock_server) -> None:
    """`checks.max_tool_errors`: a terminal command that exits non-zero is a tool error for this check
    (the tool ran, the command failed), as is a tool that reported an error."""
    checks = {"tool_called": "terminal", "max_tool_errors": 0}
    rows = [{"prompt": "RUN: exit 1\nDone", "checks": checks, "verifier": "checks"},
            {"prompt": "RUN: true\nDone", "checks": checks, "verifier": "checks"}]
    data = write_dataset(tmp_path / "t.jsonl", rows)
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=te", "sandbox=local", "filters=none",
                     "distribution=terminal_only", f"model.base_url={mock_server.base_url}")
    assert result.returncode == 0, result.stderr
    out = {r["prompt_index"]: r for r in read_jsonl(tmp_path / "outputs" / "te" / "trajectories.jsonl")}
    tool_turns = [t["value"] for t in out[0]["conversations"] if t["from"] == "tool"]
    assert len(tool_turns) == 1 and '"exit_code": 1' in tool_turns[0]  # the command ran and exited 1
    assert (out[0]["reward"], out[0]["passed"]) == (0.5, False)
    assert (out[1]["reward"], out[1]["passed"]) == (1.0, True)
