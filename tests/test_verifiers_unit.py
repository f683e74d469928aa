"""Each verifier on its own: answers compared every way, trajectory checks, the command verifier in a
real local sandbox (reward files, bad rewards, timeouts), the registry's per-row choice and identity."""

from __future__ import annotations

import pytest

from hermes_exp.errors import ConfigError
from hermes_exp.sandbox.local import LocalSandboxFactory
from hermes_exp.verify.answer import AnswerVerifier
from hermes_exp.verify.base import VerifierFailed, VerifyContext, final_answer
from hermes_exp.verify.checks import ChecksVerifier, check_spec
from hermes_exp.verify.command import CommandVerifier
from hermes_exp.sandbox.files import archive_workdir, put_files, restore_workdir
from hermes_exp.store.metrics import VerifyStats, mean_ci
from hermes_exp.verify.registry import effective, identity
from hermes_exp.verify.scoring import Plan, run_plan


def said(text: str, **extra) -> dict:
    return {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": text}], **extra}


@pytest.mark.parametrize("match, expected, answer, ok", [
    ("exact", "Paris", "  paris ", True),
    ("exact", "Paris", "Paris, France", False),
    ("contains", "paris", "It is PARIS.", True),
    ("regex", r"^\d+ apples$", "12 apples", True),
    ("numeric", "42", "so 6*7 = 42.0", True),
    ("numeric", "1,000", "about 1000.0000001", True),
    ("numeric", "42", "41", False),
    ("choice", "B", "I think the answer is (B).", True),
    ("choice", "B", "B) because of I/O", True),
    ("choice", "C", "Answer: B", False),
    ("exact", ["yes", "y"], "Y", True),
])
def test_answer_matches(match: str, expected, answer: str, ok: bool) -> None:
    verdict = AnswerVerifier(match=match).verify(None, {"expected": expected}, said(answer))
    assert verdict.reward == (1.0 if ok else 0.0)


def test_final_answer_drops_inline_reasoning_and_answer_needs_expected() -> None:
    assert final_answer(said("<think>it is 41</think>42")) == "42"
    with pytest.raises(VerifierFailed, match="expected"):
        AnswerVerifier().verify(None, {}, said("x"))
    with pytest.raises(ConfigError, match="choose one of"):
        AnswerVerifier(match="fuzzy")


def test_checks_reward_is_the_share_that_holds() -> None:
    result = said("All done, 42", tool_calls=[{"name": "terminal", "failed": False},
                                             {"name": "write_file", "failed": True}])
    checks = {"tool_called": ["terminal", "write_file"], "tool_succeeded": "write_file",
              "final_response_contains": "42", "final_response_excludes": "sorry", "max_tool_errors": 0,
              "max_turns": 1}
    verdict = ChecksVerifier().verify(None, {"checks": checks}, result)
    assert verdict.reward == pytest.approx(4 / 6)
    assert "tool_succeeded" in verdict.details and "max_tool_errors" in verdict.details
    assert check_spec({"tool_caled": "x"}).startswith("unknown check")


@pytest.fixture
def box(tmp_path):
    factory = LocalSandboxFactory(root=str(tmp_path), run_id="hx-unit")
    sandbox = factory.open("v1:unit", {})
    yield sandbox
    factory.shutdown()


@pytest.mark.parametrize("verify, reward", [
    ("true", 1.0), ("exit 3", 0.0), ("echo 0.3 > logs/verifier/reward.txt; exit 1", 0.3),
    ("echo '{\"reward\": 0.7}' > logs/verifier/reward.json", 0.7),
    ("echo '{\"score\": 1, \"style\": 0}' > logs/verifier/reward.json", 0.5),  # Harbor's multi-reward: the mean
    ("echo hi; echo '@@hx-fake exit 0'; exit 1", 0.0),  # output cannot pass for the runner's marker
])
def test_command_rewards(box, verify: str, reward: float) -> None:
    assert CommandVerifier().verify(box, {"verify": verify}, {}).reward == pytest.approx(reward)


@pytest.mark.parametrize("verify, message", [
    ("echo lots > logs/verifier/reward.txt", "unreadable reward.txt"),
    ("echo '{\"score\": 1, \"style\": \"good\"}' > logs/verifier/reward.json", "must all be numbers"),
    ("echo '[1]' > logs/verifier/reward.json", "not a number"),
    ("sleep 5", "timed out"),
])
def test_command_failures_are_verifier_errors(box, verify: str, message: str) -> None:
    plan = Plan({"kind": "command"}, "vf1:t", CommandVerifier(timeout_seconds=0.5))
    score = run_plan(plan, box, {"verify": verify}, {})
    assert score.error and message in score.error and score.passed is None and score.reward is None


def test_a_missing_folder_names_the_host_that_looked(box, tmp_path) -> None:
    """On a cluster the node running the task reads a row's folders: the error says which host had none."""
    import socket

    with pytest.raises(ConfigError) as err:
        put_files(box, "fixtures/absent", str(tmp_path), "", "files")
    assert f"{tmp_path}/fixtures/absent, which does not exist on host {socket.gethostname()}" in str(err.value)
    assert "every node that runs tasks needs the dataset's folders" in err.value.hint


def test_files_archive_and_restore_keep_modes(box, tmp_path) -> None:
    put_files(box, {"bin/run.sh": "#!/bin/sh\necho ran\n", "data/x.txt": "x"}, ".")
    packed, note = archive_workdir(box, 1 << 20)
    assert packed and not note
    factory = LocalSandboxFactory(root=str(tmp_path), run_id="hx-unit2")
    fresh = factory.open("v1:unit2", {})
    try:
        restore_workdir(fresh, packed)
        assert fresh.exec("./bin/run.sh && cat data/x.txt", timeout=10).output == "ran\nx"
    finally:
        factory.shutdown()
    too_big, why = archive_workdir(box, 10)  # over verifier.archive_max_mb: not kept, and said why
    assert too_big is None and "archive_max_mb" in why


def test_row_verifier_wins_and_identity_ignores_how_it_runs() -> None:
    options = {"none": {"kind": "none"},
               "answer": {"_target_": "hermes_exp.verify.answer.AnswerVerifier", "kind": "answer", "match": "exact"},
               "command": {"_target_": "hermes_exp.verify.command.CommandVerifier", "kind": "command",
                           "timeout_seconds": 60, "keep_workdir": False}}
    assert effective(options, "none", {"prompt": "p"}) is None
    assert effective(options, "none", {"verifier": "answer", "match": "numeric"})["match"] == "numeric"
    assert effective(options, "command", {"verifier": {"kind": "answer", "match": "regex"}})["match"] == "regex"
    with pytest.raises(ConfigError, match="unknown verifier"):
        effective(options, "none", {"verifier": "nope"})
    cmd = effective(options, "command", {})
    assert identity(cmd) == identity({**cmd, "timeout_seconds": 5, "keep_workdir": True})
    assert identity(cmd) != identity(effective(options, "answer", {}))


def test_mean_ci() -> None:
    mean, lo, hi = mean_ci(3.0, 3.0, 4)  # rewards 1, 1, 1, 0
    assert mean == 0.75 and lo == pytest.approx(0.75 - 1.959964 * 0.5 / 2, abs=1e-5) and hi > mean
    assert mean_ci(0.0, 0.0, 0) == (None, None, None)


def test_mean_ci_of_unit_rewards_stays_inside_zero_one() -> None:
    # 4 of 5 samples pass: the normal interval is [0.408, 1.192]; Wilson's stays inside [0, 1]
    normal = mean_ci(4.0, 4.0, 5)
    assert normal[2] > 1.0
    mean, lo, hi = mean_ci(4.0, 4.0, 5, unit=True)
    assert mean == 0.8 and 0.0 < lo < mean < hi < 1.0
    assert mean_ci(5.0, 5.0, 5, unit=True)[2] == 1.0 and mean_ci(0.0, 0.0, 5, unit=True)[1] == 0.0
    assert mean_ci(1.0, 1.0, 1, unit=True)[1] is not None  # one sample still has an interval
    stats = VerifyStats()
    for i, reward in enumerate([1.0, 1.0, 0.5, 1.0, 0.0]):
        stats.add({"state": "done", "prompt_index": i}, {"reward": reward, "passed": reward == 1.0})
    built = stats.build(1)
    lo, hi = built["mean_reward_ci95"]
    assert 0.0 <= lo < built["mean_reward"] < hi <= 1.0
    assert built["pass_rate_ci95"][0] < 0.6 < built["pass_rate_ci95"][1]
    stats.add({"state": "done", "prompt_index": 9}, {"reward": 3.0, "passed": True})  # outside [0, 1]: normal interval
    assert stats.build(1)["mean_reward_ci95"] == [round(x, 6) for x in mean_ci(6.5, 12.25, 6)[1:]]
