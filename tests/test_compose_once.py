"""A run invocation composes its config once (hermes_exp/cli/compose_once.py), and every way of choosing the
mode (-m, a hydra.mode override, a config that sets it) ends exactly as Hydra's own two compositions do:
each case is run through hydra.main twice, with and without the hook, and compared job by job."""

from __future__ import annotations

import io
import sys
from contextlib import nullcontext, redirect_stderr
from pathlib import Path
from typing import Any

import hydra
import pytest
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

from hermes_exp.settings.paths import config_dir, register_resolvers
from hermes_exp.cli.compose_once import Composes, composed_once, hookable

CONFIG = """\
defaults:
  - db: {db}
  - override hydra/job_logging: none
  - override hydra/hydra_logging: none
  - _self_
a: 1
b: {{c: 2}}
hydra:
  output_subdir: null
  run: {{dir: run}}
  sweep: {{dir: sweep, subdir: "${{hydra.job.num}}"}}
{mode}
"""


def _conf(tmp_path: Path, db: str = "mysql", mode: str | None = None) -> Path:
    conf = tmp_path / f"conf-{db.strip('?') or 'missing'}-{mode}"
    (conf / "db").mkdir(parents=True)
    (conf / "db" / "mysql.yaml").write_text("port: 3306\n")
    (conf / "db" / "pg.yaml").write_text("port: 5432\n")
    (conf / "config.yaml").write_text(CONFIG.format(db=db, mode=f"  mode: {mode}" if mode else ""))
    return conf


def _invoke(conf: Path, argv: list[str], hooked: bool) -> tuple[list[dict[str, Any]], Any, str, Composes]:
    """hydra.main over `conf` with this command line: every job's mode, Hydra config and config."""
    jobs: list[dict[str, Any]] = []

    def task(cfg: Any) -> None:
        hc = HydraConfig.get()
        jobs.append({"mode": str(hc.mode), "hydra": OmegaConf.to_container(hc, resolve=False),
                     "cfg": OmegaConf.to_container(cfg, resolve=False)})

    code, err, saved = 0, io.StringIO(), sys.argv
    sys.argv = ["app", *argv]
    try:
        with (composed_once() if hooked else nullcontext(Composes())) as seen, redirect_stderr(err):
            hydra.main(config_path=str(conf), config_name="config", version_base=None)(task)()
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.argv = saved
    return jobs, code, err.getvalue(), seen


def _same_both_ways(conf: Path, argv: list[str]) -> tuple[list[dict[str, Any]], Any, str, Composes]:
    plain = _invoke(conf, argv, hooked=False)
    hooked = _invoke(conf, argv, hooked=True)
    assert hooked[:3] == plain[:3]
    return hooked


def test_hydra_is_the_version_the_hook_was_written_for():
    assert hookable(), "hydra-core's ConfigLoaderImpl.load_configuration changed: review hermes_exp/cli/compose_once.py"


@pytest.mark.parametrize("argv", [[], ["a=5", "db=pg", "+x=1", "~b"], ["hydra.mode=null"], ["hydra.job.name=j"]])
def test_a_run_composes_once_and_gets_the_config_hydra_composes(tmp_path, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    jobs, code, _, seen = _same_both_ways(_conf(tmp_path), argv)
    assert code == 0 and [job["mode"] for job in jobs] == ["RunMode.RUN"]
    assert (seen.composed, seen.reused) == (1, 1)  # Hydra's get_mode composed; the run reused it
    assert jobs[0]["hydra"]["overrides"]["hydra"][-1] == "hydra.mode=RUN"


def test_a_config_that_sets_run_composes_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    jobs, code, _, seen = _same_both_ways(_conf(tmp_path, mode="RUN"), ["a=2"])
    assert code == 0 and [job["mode"] for job in jobs] == ["RunMode.RUN"] and jobs[0]["cfg"]["a"] == 2
    assert (seen.composed, seen.reused) == (1, 1)


@pytest.mark.parametrize("config_mode, argv, runs", [
    (None, ["hydra.mode=MULTIRUN"], 1),  # a multirun without -m
    (None, ["hydra.mode=MULTIRUN", "a=1,2"], 2),
    ("MULTIRUN", [], 1),  # the config asks for a multirun
    ("MULTIRUN", ["db=mysql,pg"], 2),
    (None, ["-m", "db=mysql,pg"], 2),
    (None, ["-m", "hydra.mode=RUN", "a=3"], 1),  # -m wins, with Hydra's warning
    ("RUN", ["-m", "a=1,2"], 2),
])
def test_every_multirun_stays_a_multirun(tmp_path, monkeypatch, config_mode, argv, runs):
    monkeypatch.chdir(tmp_path)
    jobs, code, _, seen = _same_both_ways(_conf(tmp_path, mode=config_mode), argv)
    assert code == 0 and [job["mode"] for job in jobs] == ["RunMode.MULTIRUN"] * runs
    assert seen.reused == 0


@pytest.mark.parametrize("db, argv, message", [
    ("mysql", ["a=1,2"], "Ambiguous value for argument 'a=1,2'"),  # a sweep needs -m
    ("mysql", ["db=mysql,pg"], "Ambiguous value for argument 'db=mysql,pg'"),
    ("???", [], "You must specify 'db'"),  # a mandatory default: the probe skips it, a run refuses it
    ("mysql", ["nope=1"], "Could not override 'nope'"),
])
def test_what_a_run_refuses_it_still_refuses_with_hydras_message(tmp_path, monkeypatch, db, argv, message):
    monkeypatch.chdir(tmp_path)
    jobs, code, err, seen = _same_both_ways(_conf(tmp_path, db=db), argv)
    assert code == 1 and not jobs and message in err
    assert seen.reused == 0


def test_a_missing_default_chosen_on_the_command_line_is_a_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    jobs, code, _, seen = _same_both_ways(_conf(tmp_path, db="???"), ["db=pg"])
    assert code == 0 and jobs[0]["cfg"]["db"] == {"port": 5432} and seen.reused == 1


def test_hermes_exps_own_config_composes_once_and_the_same(tmp_path, monkeypatch):
    register_resolvers()
    monkeypatch.chdir(tmp_path)
    argv = ["distribution=terminal_only", "model.name=m", "run_name=r", "sandbox=local", "num_workers=3"]
    jobs, code, _, seen = _same_both_ways(config_dir(), argv)
    assert code == 0 and len(jobs) == 1 and (seen.composed, seen.reused) == (1, 1)
    assert jobs[0]["cfg"]["num_workers"] == 3 and jobs[0]["hydra"]["overrides"]["task"] == argv


def test_the_hook_is_gone_after_the_invocation(tmp_path, monkeypatch):
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    before = ConfigLoaderImpl.load_configuration
    monkeypatch.chdir(tmp_path)
    _invoke(_conf(tmp_path), [], hooked=True)
    assert ConfigLoaderImpl.load_configuration is before
