"""The start-up checks live in one place (hermes_exp/run/checks.py): `check_all` validates the settings once
and returns one frozen `Checked`, which the run, the actions and the exports read instead of validating the
settings again."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from test_providers import settings_for

from hermes_exp.errors import ConfigError
from hermes_exp.run.checks import Checked, check_all

PACKAGE = Path(__file__).resolve().parent.parent / "hermes_exp"
# The validators of what Checked holds, and the only places that may call them.
VALIDATORS = {"chosen_formats", "selection_mode", "intent", "samples_per_prompt", "pilot_size"}
ALLOWED = {"run/checks.py", "run/prepare.py",  # Prepared.pilot: the settled look reads it before check_all's end
           "store/formats.py"}  # write_formats, the formats' own entry point for a ledger outside a run


def test_check_all_returns_one_frozen_value_of_what_it_checked(tmp_path: Path) -> None:
    settings = settings_for(f"run_dir={tmp_path / 'out'}", "sandbox=local", "distribution=terminal_only",
                            "selection=passed", "outputs.formats=[sharegpt,openai]", "samples_per_prompt=2",
                            "resume.retry_errors=[model]", "pilot=3")
    checked = check_all(settings)
    assert isinstance(checked, Checked)
    assert (checked.action, checked.selection, checked.formats, checked.samples, checked.pilot) == \
        ("run", "passed", ("sharegpt", "openai"), 2, 3)
    assert checked.intent == {"retry": {"model"}, "redo_filtered": False, "redo_all": False}
    assert checked.distribution and not checked.deferred  # a run with work: the toolsets are checked now
    assert checked.with_toolsets() is checked
    with pytest.raises(dataclasses.FrozenInstanceError):
        checked.selection = "all"  # type: ignore[misc]
    assert not (tmp_path / "out").exists()  # checking claims nothing


def test_a_bad_value_is_refused_by_check_all_with_the_message_the_run_gave(tmp_path: Path) -> None:
    settings = settings_for(f"run_dir={tmp_path / 'out'}", "sandbox=local", "distribution=terminal_only",
                            "selection=bogus")
    with pytest.raises(ConfigError, match="selection='bogus' is not a selection"):
        check_all(settings)


def test_the_validators_are_called_only_by_the_checks() -> None:
    """Later code reads the Checked value: no module of the run, the actions or the store validates the
    formats, the selection, the resume intent, the samples or the pilot again."""
    calls = []
    for path in PACKAGE.rglob("*.py"):
        where = str(path.relative_to(PACKAGE))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in VALIDATORS and where not in ALLOWED:
                    calls.append(f"{where}:{node.lineno} {name}")
    assert calls == []
