"""Bad input gets a clear message naming where and what, a non-zero exit, and no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import read_jsonl, run_cli, write_dataset


def _fails(result, *needles: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


def test_every_bad_line_kind_is_reported_with_its_line(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "bad.jsonl", [
        {"prompt": "fine"},
        '{"prompt": "broken',
        '["not", "an", "object"]',
        {"text": "no prompt field"},
        {"prompt": ""},
        {"prompt": 42},
        {"prompt": "also fine"},
    ])
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=bad")
    _fails(result, f"{data}:2: not valid JSON", f"{data}:3: a JSON list where an object",
           f"{data}:4: missing the required \"prompt\" field", f"{data}:5: \"prompt\" is empty",
           f"{data}:6: \"prompt\" must be a string, got int", "dataset.skip_invalid=true")
    assert not (tmp_path / "outputs" / "bad" / "trajectories.jsonl").exists()

    skipped = run_cli(tmp_path, f"dataset.path={data}", "run_name=bad", "dataset.skip_invalid=true")
    assert skipped.returncode == 0, skipped.stderr
    assert "skipping 5 invalid line(s)" in skipped.stderr
    rows = read_jsonl(tmp_path / "outputs" / "bad" / "trajectories.jsonl")
    assert sorted(r["prompt_index"] for r in rows) == [0, 6]


@pytest.mark.parametrize("content, needle", [(None, "dataset file not found"), ("", "has no valid prompts"),
                                             ("\n\n", "has no valid prompts")])
def test_missing_or_empty_dataset(tmp_path: Path, content: str | None, needle: str) -> None:
    path = tmp_path / "d.jsonl"
    if content is not None:
        path.write_text(content)
    _fails(run_cli(tmp_path, f"dataset.path={path}"), needle, str(path))


def test_missing_api_key_names_the_variable(tmp_path: Path) -> None:
    env = {"OPENROUTER_API_KEY": ""}
    result = run_cli(tmp_path, "model=sonnet", env=env)
    _fails(result, "OPENROUTER_API_KEY", "anthropic/claude-sonnet-4.6", "model=mock")
    assert not (tmp_path / "outputs" / "demo" / "ledger.db").exists()


def test_unknown_toolset_and_bad_probability(tmp_path: Path) -> None:
    env = {"HX_FAKE_KEY": "sk-fake"}  # a real (non-mock) model: an undefined toolset is refused at start-up
    real = ["model=sonnet", "provider.api_key_env=HX_FAKE_KEY", "distribution=terminal_only"]
    _fails(run_cli(tmp_path, *real, "+distribution.toolsets.webb=50", env=env),
           "distribution 'terminal_only'", "webb: no such toolset", "terminal, file", "distribution.toolsets.webb=0")
    assert not (tmp_path / "outputs" / "demo" / "ledger.db").exists()
    _fails(run_cli(tmp_path, "distribution.toolsets.terminal=150"), "150", "between 0 and 100")


def test_unknown_distribution_lists_choices(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "distribution=nope")
    assert result.returncode != 0
    assert "default" in result.stderr and "terminal_only" in result.stderr


def test_bad_scalar_settings(tmp_path: Path) -> None:
    _fails(run_cli(tmp_path, "max_turns=0"), "max_turns must be a positive integer")
    _fails(run_cli(tmp_path, "num_workers=-2"), "num_workers must be a positive integer")


def test_list_distributions(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "--list-distributions")
    assert result.returncode == 0
    assert "development" in result.stdout and "terminal: 80" in result.stdout
    assert "read_file, write_file, patch, search_files" in result.stdout


def test_unreachable_base_url_is_found_at_start_up(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "run_name=unreach", "model.base_url=http://127.0.0.1:9/v1")
    _fails(result, "cannot reach the model endpoint http://127.0.0.1:9/v1", "Connection refused", "model=mock")
    assert result.returncode == 2
    assert "failed" not in result.stderr  # no task was attempted


def test_docker_engine_down_is_one_clear_error(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "run_name=nodocker", "sandbox=docker", env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    _fails(result, "cannot reach the Docker engine at unix:///nonexistent.sock", "sandbox=bwrap or sandbox=local")
    assert result.stderr.count("cannot reach the Docker engine") == 1


def test_unknown_config_key_says_which_it_meant(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "max_turn=5")  # more cases: tests/test_cli_errors.py
    _fails(result, "max_turn is not a setting of the config: did you mean max_turns?", "fix: max_turns=5")
    assert result.returncode == 2


def test_unknown_output_format(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "outputs.formats=[sharegpt,csv]")
    _fails(result, "'csv'", "sharegpt, openai, parquet")
    assert not (tmp_path / "outputs" / "demo" / "ledger.db").exists()  # refused before any work


@pytest.mark.parametrize("overrides, needles", [
    (("sandbox=docker", "sandbox.warm_pool=-1"), ("error: sandbox.warm_pool=-1 must be an integer >= 0",
                                                  "fix: set sandbox.warm_pool=<integer >= 0>")),
    (("executor=processes", "executor.n_jobs=many"), ("error: executor.n_jobs='many' must be a positive integer",
                                                       "fix: set executor.n_jobs=<positive integer>")),
    (("filters.rules=[{_target_: hermes_exp.store.filters.NoSuchRule}]",), ("fix: check filters.rules[0]._target_",)),
])
def test_a_value_its_constructor_refuses_gets_the_constructors_message(tmp_path: Path, overrides, needles) -> None:
    """Hydra wraps what a `_target_`'s constructor raises; the user sees the constructor's own message and fix
    (the key, the bad value, what is valid), exit 2, not Hydra's "Error in call to target"."""
    result = run_cli(tmp_path, "run_name=ctor", *overrides, env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    _fails(result, *needles)
    assert "Error in call to target" not in result.stderr
    assert result.returncode == 2
