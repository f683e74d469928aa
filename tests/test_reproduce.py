"""The `.hydra/` snapshot describes the run that made the ledger's results: exports and refused
invocations leave it alone, and reproducing from it in a new directory gives the same trajectories."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_cli, write_dataset

pytestmark = pytest.mark.slow

# The demo's prompts without the browser one (its mock web site answers on a port of the moment).
ROWS = [json.loads(line) for line in (REPO / "hermes_exp" / "data" / "demo_prompts.jsonl").read_text().splitlines()
        if "browser" not in line]


def _trajectories(path: Path) -> list[str]:
    """Each line with its timestamp taken out (the only part a reproduction may change)."""
    return [re.sub(r'"timestamp": "[^"]*"', '"timestamp": null', line) for line in path.read_text().splitlines()]


def test_snapshot_is_the_run_and_reproduces_it(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "prompts.jsonl", ROWS)
    run = ("run_name=orig", f"dataset.path={data}", "distribution=terminal_only", "samples_per_prompt=2")
    first = run_cli(tmp_path, *run)
    assert first.returncode == 0, first.stderr
    hydra = tmp_path / "outputs" / "orig" / ".hydra"
    saved = {name: (hydra / name).read_bytes() for name in ("config.yaml", "overrides.yaml", "hydra.yaml")}
    made = (tmp_path / "outputs" / "orig" / "trajectories.jsonl").read_text()

    exported = run_cli(tmp_path, *run, "action=export", "filters=none")
    assert exported.returncode == 0, exported.stderr
    refused = run_cli(tmp_path, *run, "seed=9")
    assert refused.returncode == 2 and "holds another experiment" in refused.stderr
    assert {name: (hydra / name).read_bytes() for name in saved} == saved  # neither rewrote the snapshot

    config = yaml.safe_load(saved["config.yaml"])
    assert config["action"] == "run" and config["seed"] == 0
    assert not [o for o in yaml.safe_load(saved["overrides.yaml"]) if o.startswith("action")]

    again = run_cli(tmp_path, "--config-path", str(hydra), "--config-name", "config", "run_name=again")
    assert again.returncode == 0, again.stderr
    copy = tmp_path / "outputs" / "again" / "trajectories.jsonl"
    assert _trajectories(copy) == [re.sub(r'"timestamp": "[^"]*"', '"timestamp": null', line)
                                   for line in made.splitlines()]
    assert len(made.splitlines()) == 2 * len(ROWS)


def test_the_snapshot_names_no_action_override(tmp_path: Path) -> None:
    """A run given `action=run` explicitly, and a later export: the snapshot never names an action override."""
    data = write_dataset(tmp_path / "prompts.jsonl", ROWS[:3])
    run = ("run_name=r", f"dataset.path={data}", "distribution=terminal_only")
    assert run_cli(tmp_path, *run, "action=run").returncode == 0
    assert run_cli(tmp_path, *run, "action=export", "selection=passed").returncode == 0
    hydra = tmp_path / "outputs" / "r" / ".hydra"
    assert yaml.safe_load((hydra / "overrides.yaml").read_text()) == [o for o in run]
    assert "action=" not in yaml.safe_load((hydra / "hydra.yaml").read_text())["hydra"]["job"]["override_dirname"]
