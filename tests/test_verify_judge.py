"""The judge verifier through the real CLI and the mock model: what the judge sees and what it costs, a judge
model given in part refused up front, and the offline judge grading honestly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import read_jsonl, run_cli, write_dataset


def test_judge_sees_rubric_and_transcript_and_its_cost_counts(tmp_path: Path, mock_server) -> None:
    rows = [{"prompt": "RUN: echo hello world\nGreet", "rubric": 'Must show "hello world" and "goodbye".'},
            {"prompt": "RUN: echo goodbye hello world\nGreet", "rubric": 'Must show "hello world" and "goodbye".'}]
    data = write_dataset(tmp_path / "j.jsonl", rows)
    base = [f"dataset.path={data}", "run_name=j", "sandbox=local", "filters=none", "verifier=judge",
            f"model.base_url={mock_server.base_url}", "model.pricing.prompt=1000", "model.pricing.completion=1000"]
    first = run_cli(tmp_path, *base)
    assert first.returncode == 0, first.stderr
    out = tmp_path / "outputs" / "j"
    assert [r["reward"] for r in read_jsonl(out / "trajectories.jsonl")] == [0.5, 1.0]
    bodies = [json.loads(line)["body"] for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    judged = [b for b in bodies if not b.get("tools") and "<rubric>" in b["messages"][-1]["content"]]
    assert len(judged) == 2
    for body in judged:
        text = body["messages"][-1]["content"]
        assert 'Must show "hello world" and "goodbye".' in text
        assert "<transcript>" in text and "[tool terminal]" in text and "hello world" in text
    stats = json.loads((out / "statistics.json").read_text())
    judge_cost = stats["verification"]["judge_cost_usd"]
    assert judge_cost > 0 and stats["verification"]["judge_api_calls"] == 2
    assert stats["spent_usd"] == pytest.approx(stats["cost_usd"] + judge_cost, rel=1e-6)
    # The budget counts the judge: room for the agents' spend alone is not room for this run's spend.
    write_dataset(data, [*rows, {"prompt": "one more"}])
    stopped = run_cli(tmp_path, *base, f"budget.max_cost_usd={stats['cost_usd'] + judge_cost / 2}")
    assert stopped.returncode == 4, stopped.stderr
    assert "budget reached" in stopped.stderr


@pytest.mark.parametrize("overrides, needles", [
    (("++verifier.model.base_url=http://127.0.0.1:9/v1",), ("verifier.model has no name", "give the judge's model whole")),
    (("verifier.model={name: judge-x}", "budget.max_cost_usd=5", "model.pricing.prompt=1", "model.pricing.completion=1"),
     ("verifier.model.pricing is null for the judge's model 'judge-x'", "set verifier.model.pricing.prompt")),
])
def test_a_judge_model_given_in_part_is_refused_before_any_work(tmp_path: Path, overrides, needles) -> None:
    """Hydra replaces `${model}` with what the user gives for verifier.model: a part of a model (no name),
    or a model without prices under a budget, is a config error up front, not a failed verification per
    sample after the agents have run (and been paid for)."""
    data = write_dataset(tmp_path / "j.jsonl", [{"prompt": "RUN: echo hi\nGreet"}])
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=jm", "sandbox=local", "verifier=judge", *overrides)
    assert result.returncode == 2, result.stderr
    for needle in needles:
        assert needle in result.stderr
    assert not (tmp_path / "outputs" / "jm" / "ledger.db").exists()


def test_the_mock_judge_checks_the_answer_and_fails_when_it_has_nothing_to_check(tmp_path: Path, mock_server) -> None:
    """The offline judge grades honestly: with no quoted phrase in the rubric it checks the final answer
    against the row's `expected`, and with neither it fails the sample rather than pass anything."""
    judged = {"verifier": "judge", "rubric": "The answer is correct."}
    rows = [{"prompt": "What is 7*8?\nANSWER: 54", "expected": "56", **judged},
            {"prompt": "What is 7*8?\nANSWER: 56", "expected": "56", **judged},
            {"prompt": "What is 7*8?\nANSWER: 560", "expected": ["56", "fifty-six"], **judged},
            {"prompt": "What is 7*8?\nANSWER: 54", **judged}]
    data = write_dataset(tmp_path / "m.jsonl", rows)
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=mj", "sandbox=local", "filters=none",
                     f"model.base_url={mock_server.base_url}")
    assert result.returncode == 0, result.stderr
    out = sorted(read_jsonl(tmp_path / "outputs" / "mj" / "trajectories.jsonl"), key=lambda r: r["prompt_index"])
    assert [(r["reward"], r["passed"]) for r in out] == [(0.0, False), (1.0, True), (0.0, False), (0.0, False)]
