"""The warning that `filters=verified` with `verifier=none` filters every sample: given at start-up, before
the run pays for samples, and for any rule built on Verified."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from conftest import run_cli, write_dataset

from hermes_exp.store.filters import Verified, warn_if_nothing_verifies


class StrictVerified(Verified):
    """A user's own rule built on Verified (its class name is not "Verified")."""


@pytest.mark.parametrize(("rules", "warned"), [
    ([{"_target_": "hermes_exp.store.filters.Verified"}], True),
    ([{"_target_": "test_verify_warnings.StrictVerified"}], True),  # recognised by what it is, not by its name
    ([{"_target_": "hermes_exp.store.filters.ToolErrors", "max_failures": 1}], False),
])
def test_the_nothing_verifies_warning_knows_a_verified_rule_by_its_class(rules, warned, caplog) -> None:
    with caplog.at_level(logging.WARNING):
        warn_if_nothing_verifies({"filters": {"rules": rules}, "verifier": {"kind": "none"}})
    assert ("verifier=none" in caplog.text) is warned


def test_filters_verified_without_a_verifier_warns_before_the_run_pays(tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "v.jsonl", [{"prompt": "ANSWER: 4", "expected": "4"}])
    args = [f"dataset.path={data}", "sandbox=local", "filters=verified", f"model.base_url={mock_server.base_url}"]
    bare = run_cli(tmp_path, *args, "run_name=fv")
    assert bare.returncode == 0, bare.stderr
    assert "filters.rules: Verified), and verifier=none" in bare.stderr and "filtered as not_verified" in bare.stderr
    assert json.loads((tmp_path / "outputs" / "fv" / "statistics.json").read_text())["filtered"] == 1
    scored = run_cli(tmp_path, *args, "run_name=fa", "verifier=answer")
    assert scored.returncode == 0 and "verifier=none" not in scored.stderr, scored.stderr
