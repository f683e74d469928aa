"""The command's own mistakes, as a user makes them: each is one `error:` with its fix, the documented exit
code (2: bad input or config), no traceback, and nothing left behind. Real CLI subprocesses, real files."""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from conftest import REPO, read_jsonl, run_cli, write_dataset


def refused(result: subprocess.CompletedProcess, *needles: str) -> str:
    """The invocation exited 2 with every needle in its stderr and no traceback; its stderr."""
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    assert result.returncode == 2, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr
    return result.stderr


def blocked(tmp_path: Path, package: str) -> dict[str, str]:
    """An environment in which `import package` fails as if it were not installed: a package of that
    name, first on PYTHONPATH, raises ImportError."""
    folder = tmp_path / f"without-{package}" / package
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(f"raise ImportError('{package} is not installed here')\n")
    return {"PYTHONPATH": str(folder.parent)}


# --- Hydra's errors, said as ours -------------------------------------------------------------------

@pytest.mark.parametrize("override, said, fix", [
    ("max_turn=3", "max_turn is not a setting of the config: did you mean max_turns?", "fix: max_turns=3"),
    ("model.sampling.temprature=0.5", "did you mean model.sampling.temperature?",
     "fix: model.sampling.temperature=0.5"),
    ("model.temperature=0.5", "did you mean model.sampling.temperature?", "fix: model.sampling.temperature=0.5"),
    ("modle=sonnet", "did you mean model?", "fix: model=sonnet"),
    ("zzqx=1", "zzqx is not a setting of the config (none is named like it)", "hermes-exp --cfg job"),
    ("dataset.fields.prompt=question", "dataset.fields holds no keys yet", "fix: +dataset.fields.prompt=question"),
])
def test_a_key_the_config_lacks_says_what_was_meant_at_the_first_try(tmp_path: Path, override, said, fix) -> None:
    err = refused(run_cli(tmp_path, override, "run_name=typo"), said, fix)
    assert "To append to your config" not in err and "HYDRA_FULL_ERROR" not in err
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize("args, said", [
    (("model=gpt5",), "model=gpt5 is not an option of the config group model: did you mean model=gpt4o?"),
    (("verifier=answers",), "verifier=answers is not an option of the config group verifier: did you mean "
                            "verifier=answer?"),
    (("-m", "model=gpt5,mock"), "did you mean model=gpt4o?"),
    (("--cfg", "job", "model=gpt5"), "did you mean model=gpt4o?"),
])
def test_an_unknown_option_lists_the_groups_options_without_hydras_search_path(tmp_path: Path, args, said) -> None:
    err = refused(run_cli(tmp_path, *args), said)
    assert "model's options: deepseek, gemini, gpt4o" in err or "verifier's options: answer, checks, command" in err
    assert "Config search path" not in err and "HYDRA_FULL_ERROR" not in err


def test_list_distributions_with_an_unknown_option_is_refused_the_same_way(tmp_path: Path) -> None:
    refused(run_cli(tmp_path, "--list-distributions", "model=gpt5"), "did you mean model=gpt4o?")


@pytest.mark.parametrize("override, said", [
    ("model=mock,sonnet", "model=mock,sonnet: a comma-separated value sweeps, which needs -m"),
    ("max_turns=[", "cannot read the override 'max_turns=['"),
    ("run_name=${nope}", "Interpolation key 'nope' not found"),
])
def test_other_composition_errors_exit_2_with_one_message(tmp_path: Path, override, said) -> None:
    err = refused(run_cli(tmp_path, override), said)
    assert "HYDRA_FULL_ERROR" not in err


def test_a_path_given_to_the_dataset_section_points_at_dataset_path(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "mini.jsonl", [{"prompt": "hi"}])
    err = refused(run_cli(tmp_path, f"dataset={data}", "run_name=slip"),
                  f"dataset={data} gives a value to the section dataset", f"fix: set one of its keys, e.g. "
                  f"dataset.path={data}")
    assert "dictionary update sequence" not in err
    assert not (tmp_path / "outputs" / "slip").exists()


# --- the run directory ------------------------------------------------------------------------------

def test_a_run_directory_under_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    refused(run_cli(tmp_path, "hydra.run.dir=afile/run"),
            f"error: cannot write {tmp_path / 'afile' / 'run'}: Not a directory", "hydra.run.dir=")


def _read_only(tmp_path: Path, ro: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The CLI with `ro` mounted read-only (bubblewrap: refused even to root, unlike a chmod)."""
    if not shutil.which("bwrap") or subprocess.run(["bwrap", "--dev-bind", "/", "/", "true"]).returncode:
        pytest.skip("needs bubblewrap to mount a folder read-only")
    return subprocess.run(["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(ro), str(ro), "--chdir", str(cwd),
                           sys.executable, "-m", "hermes_exp.cli", *args],
                          capture_output=True, text=True, timeout=120)


def test_a_read_only_working_directory_or_run_directory_is_one_error(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    refused(_read_only(tmp_path, ro, "run_name=new", cwd=ro),
            f"error: cannot write {ro / 'outputs'}", "Read-only file system", "hydra.run.dir=")
    refused(_read_only(tmp_path, ro, f"hydra.run.dir={ro}/elsewhere", cwd=tmp_path),
            f"error: cannot write {ro / 'elsewhere'}", "Read-only file system")
    (ro / "outputs" / "old").mkdir(parents=True)  # a run directory made earlier, now not writable
    refused(_read_only(tmp_path, ro, "run_name=old", cwd=ro),
            f"error: cannot write {ro / 'outputs' / 'old'}", "Read-only file system")


def test_a_refused_invocation_leaves_no_run_directory_behind(tmp_path: Path) -> None:
    refused(run_cli(tmp_path, "run_name=x", "seed=abc"), "seed='abc' must be an integer")
    refused(run_cli(tmp_path, "run_name=x", "dataset.path=missing.jsonl"), "dataset file not found")
    assert not (tmp_path / "outputs" / "x").exists()
    (tmp_path / "outputs" / "kept").mkdir(parents=True)
    (tmp_path / "outputs" / "kept" / "notes.txt").write_text("mine")
    refused(run_cli(tmp_path, "run_name=kept", "seed=abc"))
    assert sorted(p.name for p in (tmp_path / "outputs" / "kept").iterdir()) == ["cli.log", "notes.txt"]


# --- inputs and outputs, checked before any work ------------------------------------------------------

def test_a_csv_without_a_prompt_column_points_at_dataset_fields(tmp_path: Path) -> None:
    data = tmp_path / "q.csv"
    data.write_text("question,answer\nwhat is 2+2?,4\nwhat is 3+3?,6\n")
    err = refused(run_cli(tmp_path, f"dataset.path={data}", "run_name=csv"),
                  f"{data}:1: there is no \"prompt\" column; the columns are: question, answer",
                  "fix: name the column that holds the prompts: +dataset.fields.prompt=<column>, "
                  "e.g. +dataset.fields.prompt=question")
    assert ":2:" not in err  # one error for the file, not one per row
    refused(run_cli(tmp_path, f"dataset.path={data}", "run_name=csv", "+dataset.fields.prompt=questin"),
            "dataset.fields.prompt=questin names no \"questin\" column", "e.g. dataset.fields.prompt=question")


def test_parquet_without_pyarrow_is_refused_before_any_file_is_written(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "outputs.formats=[sharegpt,parquet]", "run_name=pq", "max_samples=1",
                     env=blocked(tmp_path, "pyarrow"))
    refused(result, "the parquet output format needs pyarrow", "hermes-exp[parquet]")
    assert not (tmp_path / "outputs" / "pq").exists()


# --- --version, --help --------------------------------------------------------------------------------

def test_version_is_hermes_exps(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"hermes-exp {metadata.version('hermes-exp')} (Hydra ")


def test_help_shows_usage_groups_and_options_not_the_whole_config(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "--help")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "usage: hermes-exp" in out and "hermes-exp --cfg job" in out and "--hydra-help" in out
    for group in (p for p in (REPO / "conf").iterdir() if p.is_dir() and p.name != "model_defaults"):
        assert f"\n  {group.name} " in out, group.name
        for option in group.glob("*.yaml"):
            assert option.stem in out, option
    assert "[mock]" in out and "[threads]" in out
    assert "system_prompt:" not in out and len(out.splitlines()) < 80
    assert run_cli(tmp_path, "-h").stdout == out


def test_hydras_own_help_and_cfg_still_work(tmp_path: Path) -> None:
    hydra_help = run_cli(tmp_path, "--hydra-help")
    assert hydra_help.returncode == 0 and "Hydra (" in hydra_help.stdout
    cfg = run_cli(tmp_path, "--cfg", "job", "max_turns=7")
    assert cfg.returncode == 0 and "max_turns: 7" in cfg.stdout


# --- messages in their place ------------------------------------------------------------------------

def test_the_demos_browser_warning_waits_for_the_checks_and_the_listing_says_it_once(tmp_path: Path) -> None:
    env = blocked(tmp_path, "playwright")
    err = refused(run_cli(tmp_path, "outputs.formats=[sharegpt,csv]", env=env), "'csv'")
    assert "playwright" not in err  # the error is the only thing said
    listing = run_cli(tmp_path, "--list-distributions", env=env)
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.count("needs the `playwright` package") == 1, listing.stdout


# --- run_name ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("typed", ["true", "2024", "1e3"])
def test_a_run_name_yaml_would_type_is_the_text_typed(tmp_path: Path, typed: str) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "RUN: echo hi"}])
    result = run_cli(tmp_path, f"run_name={typed}", f"dataset.path={data}", "sandbox=local")
    assert result.returncode == 0, result.stderr
    assert len(read_jsonl(tmp_path / "outputs" / typed / "trajectories.jsonl")) == 1
    assert [p.name for p in (tmp_path / "outputs").iterdir()] == [typed]
