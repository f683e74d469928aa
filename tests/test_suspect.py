"""A zero that looks like infrastructure is not a zero (issue 32, section 2): verify commands that fail for
real here (a download from a host that does not resolve, a test runner that is not installed) are marked
verifier_suspect with the matched reason; an agent's real failure stays a plain zero. Real CLI, mock model,
real subprocesses; statistics.json checked against the ledger."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import read_jsonl, request_count, run_cli, write_dataset
from omegaconf import OmegaConf

from hermes_exp.errors import ConfigError
from hermes_exp.settings.paths import config_dir
from hermes_exp.verify import registry
from hermes_exp.verify.suspect import rules

ASSERT = "grep -qx 42 answer.txt || { echo 'AssertionError: answer.txt does not hold 42'; exit 1; }"
# Harbor's usual test.sh: fetch the test runner, then run it; there is no network here
DOWNLOAD = "set -e\ncurl -sS --max-time 10 -o uv.sh https://astral.hermes-exp-test.invalid/uv/install.sh\nsh uv.sh\n" + ASSERT
NO_RUNNER = "#!/bin/sh\nPATH=/nonexistent\npytest -q tests/test_outputs.py\n"  # a runner the image lacks


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _defaults():
    cfg = OmegaConf.to_container(OmegaConf.load(config_dir() / "verifier" / "command.yaml"))
    return rules(cfg["infra_patterns"], cfg["infra_exit_codes"])


def _run(script: str, cwd: Path) -> tuple[str, int]:
    """What a verify command prints and its exit status, as the sandbox runs it (`sh -c`)."""
    done = subprocess.run(["sh", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr, done.returncode


def test_the_default_patterns_on_real_failure_outputs(tmp_path: Path) -> None:
    infra = _defaults()
    (tmp_path / "answer.txt").write_text("41\n")
    port = _closed_port()
    cases = {  # script -> what the reason must quote (None: a plain zero)
        DOWNLOAD: "Could not resolve host",
        "PATH=/nonexistent; pytest -q tests": "exited 127",
        f"{sys.executable} -S -m pytest -q tests": "No module named pytest",
        f"{sys.executable} -m pip download -q --no-index --find-links /nonexistent left-pad==1.0": "Could not find a version",
        ASSERT: None,
        # the agent's own service, not started: its failure, not the environment's
        f"curl -sS --max-time 5 http://127.0.0.1:{port}/health && exit 0; exit 1": None,
    }
    for script, quoted in cases.items():
        output, code = _run(script, tmp_path)
        reason = infra.reason(output, code)
        assert code != 0, (script, output)
        assert (reason is None) if quoted is None else (quoted in (reason or "")), (script, output, reason)
    assert rules([], []).reason("curl: (6) Could not resolve host: x.invalid", 127) is None  # [] turns it off


def test_bad_patterns_are_refused_with_their_key() -> None:
    with pytest.raises(ConfigError, match=r"verifier.infra_patterns\[1\] '\(' is not a valid regular expression"):
        rules(["ok", "("], [])
    with pytest.raises(ConfigError, match=r"verifier.infra_exit_codes\[0\]"):
        rules([], ["127"])
    with pytest.raises(ConfigError, match="must be a list"):
        rules("pytest", [])


def test_the_patterns_leave_the_verifier_identity_alone() -> None:
    """Scores of runs made before the patterns existed keep being found (their verifier identity)."""
    cfg = OmegaConf.to_container(OmegaConf.load(config_dir() / "verifier" / "command.yaml"))
    older = {k: v for k, v in cfg.items() if not k.startswith("infra_")}
    assert registry.identity(cfg) == registry.identity(older) == registry.identity({**cfg, "infra_patterns": []})


def _rows(flag: Path, port: int) -> list[dict]:
    """(0) a download that cannot resolve, (1) a missing pytest (exit 127), (2) `python -m pytest` without
    pytest until `flag` exists (the environment mended), (3) the agent's wrong answer, (4) its service
    that is not up, (5) a pass."""
    mended = f"if [ -f {flag} ]; then {ASSERT}; else {sys.executable} -S -m pytest -q tests; fi"
    return [
        {"prompt": "WRITE: answer.txt 42\ndownload", "verify": DOWNLOAD},
        {"prompt": "WRITE: answer.txt 42\nno runner", "tests": {"tests/test.sh": NO_RUNNER}, "verify": "sh tests/test.sh"},
        {"prompt": "WRITE: answer.txt 42\nno module", "verify": mended},
        {"prompt": "WRITE: answer.txt 41\nwrong", "verify": ASSERT},
        {"prompt": "RUN: true\nservice", "verify": f"curl -sS --max-time 5 http://127.0.0.1:{port}/ || exit 1"},
        {"prompt": "WRITE: answer.txt 42\nright", "verify": ASSERT},
    ]


def _ledger(out: Path) -> dict[int, tuple]:
    with sqlite3.connect(out / "ledger.db") as db:
        return {i: (r, p, s, at) for i, r, p, s, at in db.execute(
            "SELECT t.prompt_index, s.reward, s.passed, s.suspect, s.scored_at FROM scores s JOIN tasks t USING (key)")}


def _check_statistics(out: Path) -> dict:
    """statistics.json's verification against the ledger's scores."""
    v = json.loads((out / "statistics.json").read_text())["verification"]
    scores = _ledger(out)
    suspect = [i for i, (_, _, s, _) in scores.items() if s]
    trusted = [p for i, (_, p, _, _) in scores.items() if i not in suspect]
    assert v["scored"] == len(scores) and v["passed"] == sum(p for _, p, _, _ in scores.values())
    assert v["suspect"] == len(suspect) == len(v["suspect_samples"])
    assert v["pass_rate_without_suspect"] == round(sum(trusted) / len(trusted), 6)
    assert [s["prompt_index"] for s in v["suspect_samples"]] == sorted(suspect)
    return v


@pytest.mark.slow
def test_suspect_zeros_through_the_cli(tmp_path: Path, mock_server) -> None:
    flag = tmp_path / "network-is-back"
    data = write_dataset(tmp_path / "s.jsonl", _rows(flag, _closed_port()))
    base = [f"dataset.path={data}", "run_name=s", "sandbox=local", "verifier=command", "filters=none",
            "distribution=terminal_only", f"model.base_url={mock_server.base_url}"]
    first = run_cli(tmp_path, *base)
    assert first.returncode == 0, first.stderr
    out = tmp_path / "outputs" / "s"
    scores = _ledger(out)
    assert {i: (r, p) for i, (r, p, _, _) in scores.items()} == {i: (1.0 if i == 5 else 0.0, int(i == 5)) for i in range(6)}
    reasons = {i: s for i, (_, _, s, _) in scores.items() if s}
    assert sorted(reasons) == [0, 1, 2], reasons
    assert "Could not resolve host" in reasons[0] and "exited 127" in reasons[1] and "No module named" in reasons[2]
    v = _check_statistics(out)
    assert (v["suspect"], v["pass_rate"], v["pass_rate_without_suspect"]) == (3, round(1 / 6, 6), round(1 / 3, 6))
    assert "suspect 3" in first.stderr  # the progress line
    assert "3 verifier_suspect" in first.stderr and "pass rate without them 33.3%" in first.stderr  # the summary
    assert len(list((out / "archives").glob("*.tar.gz"))) == 3  # kept to verify them again

    verified = run_cli(tmp_path, *[a for a in base if a != "filters=none"], "filters=verified", "action=export")
    assert verified.returncode == 0, verified.stderr
    stats = json.loads((out / "statistics.json").read_text())
    assert stats["discarded"] == {"verifier_suspect": 3, "not_passed": 2}
    assert [r["prompt_index"] for r in read_jsonl(out / "trajectories.jsonl")] == [5]

    flag.write_text("")
    calls = request_count(tmp_path / "requests.jsonl")
    again = run_cli(tmp_path, *base, "action=score", "score.only=suspect")
    assert again.returncode == 0, again.stderr
    assert "3 sample(s) verified without the agent" in again.stderr and request_count(tmp_path / "requests.jsonl") == calls
    after = _ledger(out)
    assert {i: s[3] for i, s in after.items() if i > 2} == {i: s[3] for i, s in scores.items() if i > 2}
    assert after[2][:3] == (1.0, 1, None) and after[0][2] and after[1][2]
    v = _check_statistics(out)
    assert (v["suspect"], v["passed"]) == (2, 2)

    report = subprocess.run([sys.executable, "-m", "hermes_exp.report", str(out)], capture_output=True, text=True,
                            timeout=120)
    assert report.returncode == 0, report.stderr
    html = (out / "report.html").read_text()
    assert '"verdict":"suspect"' in html and "pass rate without verifier_suspect samples" in html

    nothing = run_cli(tmp_path, *base, "action=score", "score.only=suspect", "verifier.infra_patterns=[]",
                      "verifier.infra_exit_codes=[]")
    assert nothing.returncode == 0 and "2 sample(s) verified without the agent" in nothing.stderr
    assert json.loads((out / "statistics.json").read_text())["verification"]["suspect"] == 0


@pytest.mark.parametrize("override, needle", [
    ("verifier.infra_patterns=['(']", "verifier.infra_patterns[0] '(' is not a valid regular expression"),
    ("score.only=everything", "score.only='everything' is not valid; valid values: suspect"),
])
def test_bad_suspect_config_exits_2(tmp_path: Path, override: str, needle: str) -> None:
    result = run_cli(tmp_path, "verifier=command", override, "run_name=bad")
    assert result.returncode == 2, result.stderr
    assert needle in result.stderr and "Traceback" not in result.stderr
