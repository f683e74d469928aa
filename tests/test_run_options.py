"""The run's keys that are read with a bare bool()/int()/float() are checked before any work: a string
Hydra leaves as it is ("no", "maybe", "abc") is refused with the key, the value and the fix, exit 2."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from conftest import request_count, run_cli, write_dataset

from hermes_exp.errors import ConfigError
from hermes_exp.settings.run_options import check

BASE = {"dataset": {"skip_invalid": False}, "agent": {"kind": "oracle", "timeout_seconds": 600}, "seed": 0, "setup_timeout": 300, "resume": {"redo_filtered": False, "redo_all": False, "new_identity": False,
                                                    "task_attempts": 2, "grace_seconds": 10},
        "outputs": {"splits": False, "allow_shrink": False, "compress": False},
        "tools": {"terminal_timeout": 60, "max_output_chars": 20000}, "model": {"name": "m", "timeout": 600}}


@pytest.mark.parametrize("path, value, says", [
    ("resume.redo_all", "no", "must be true, false or null"),
    ("resume.redo_filtered", "yes", "must be true, false or null"),
    ("resume.new_identity", 2, "must be true, false or null"),
    ("outputs.splits", "maybe", "must be true, false or null"),
    ("outputs.allow_shrink", 1, "must be true, false or null"),
    ("outputs.compress", "on", "must be true, false or null"),
    ("dataset.skip_invalid", "no", "must be true, false or null"),
    ("agent.timeout_seconds", "x", "must be a positive number"),
    ("seed", "abc", "must be an integer"),
    ("seed", None, "must be an integer"),
    ("setup_timeout", -1, "must be a positive number"),
    ("resume.task_attempts", 0, "must be an integer >= 1"),
    ("resume.task_attempts", None, "must be an integer >= 1"),
    ("resume.grace_seconds", -1, "must be a number >= 0"),
    ("tools.terminal_timeout", 0, "must be a positive number"),
    ("tools.max_output_chars", "x", "must be a positive integer"),
    ("model.timeout", "x", "must be a positive number"),
    ("model.timeout", None, "must be a positive number"),
])
def test_a_bad_value_is_refused_with_its_key(path: str, value, says: str) -> None:
    settings = copy.deepcopy(BASE)
    *parents, key = path.split(".")
    node = settings
    for parent in parents:
        node = node[parent]
    node[key] = value
    with pytest.raises(ConfigError) as err:
        check(settings)
    assert f"{path}=" in err.value.message and says in err.value.message and path in err.value.hint


def test_good_values_and_absent_keys_pass() -> None:
    check(copy.deepcopy(BASE))
    check({"seed": -3, "setup_timeout": None, "model": {"name": "judge-less"}})  # absent keys keep their defaults


def test_redo_all_no_is_refused_and_runs_nothing_again(tmp_path: Path, mock_server) -> None:
    """`resume.redo_all=no` used to be the string "no", which bool() takes for true: every finished task
    ran (and was paid for) again. Now it is exit 2 and not one model call."""
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "RUN: echo hi\nGreet"}])
    args = [f"dataset.path={data}", "run_name=ro", "sandbox=local", f"model.base_url={mock_server.base_url}"]
    assert run_cli(tmp_path, *args).returncode == 0
    calls = request_count(tmp_path / "requests.jsonl")
    refused = run_cli(tmp_path, *args, "resume.redo_all=no")
    assert refused.returncode == 2, refused.stderr
    assert "error: resume.redo_all='no' must be true, false or null" in refused.stderr
    assert "fix: set resume.redo_all=true or resume.redo_all=false" in refused.stderr
    assert request_count(tmp_path / "requests.jsonl") == calls
