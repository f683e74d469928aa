"""The built wheel ships its configs and demo data: the app runs from it, outside the source tree."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_runs_the_demo_outside_the_checkout(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(REPO)],
                   check=True, capture_output=True, timeout=300)
    [wheel] = dist.glob("hermes_exp-*.whl")
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    assert (site / "hermes_exp" / "conf" / "config.yaml").is_file()
    assert (site / "hermes_exp" / "conf" / "model" / "sonnet.yaml").is_file()
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    where = subprocess.run([sys.executable, "-c", "import hermes_exp.cli.app as c; print(c.__file__, c.config_dir())"],
                           cwd=work, env=env, capture_output=True, text=True, check=True)
    assert where.stdout.startswith(str(site)) and f"{site}/hermes_exp/conf" in where.stdout
    result = subprocess.run([sys.executable, "-m", "hermes_exp.cli", "sandbox=local"], cwd=work, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    shipped = (site / "hermes_exp" / "data" / "demo_prompts.jsonl").read_text().splitlines()
    prompts = [line for line in shipped if line.strip()]
    assert len(prompts) >= 8
    # the mock keeps every demo prompt: one trajectory per shipped prompt
    assert (work / "outputs" / "demo" / "trajectories.jsonl").read_text().count("\n") == len(prompts)
