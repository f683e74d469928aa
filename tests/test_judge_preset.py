"""verifier.preset: the judge's model and provider from a model preset, composed by Hydra as `model=<name>`
composes the run's (verify/preset.py). Real Hydra compositions; the real CLI against the mock model, whose
recorded request bodies show which model each call asked for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes_exp.settings.paths import config_dir
from hermes_exp.errors import ConfigError
from hermes_exp.cli.listing import compose_settings
from hermes_exp.verify.registry import effective, identity, load_options
from tests.conftest import read_jsonl, run_cli, write_dataset


def _judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *overrides: str) -> tuple[dict, dict]:
    monkeypatch.chdir(tmp_path)
    settings = compose_settings(config_dir(), ["verifier=judge", *overrides])
    return settings, load_options(settings, config_dir())["judge"]


def test_a_preset_gives_the_judge_its_model_and_provider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings, judge = _judge(tmp_path, monkeypatch, "model=sonnet", "verifier.preset=gpt4o")
    assert (settings["model"]["name"], settings["provider"]["name"]) == ("anthropic/claude-sonnet-4.6", "openrouter")
    assert (judge["model"]["name"], judge["provider"]["name"]) == ("gpt-4o", "openai")
    assert judge["model"]["pricing"]["prompt"] == 2.5 and judge["provider"]["api_key_env"] == "OPENAI_API_KEY"
    assert judge["model"]["retry"] == settings["model"]["retry"]  # the preset's defaults, as the run's model has
    _, routed = _judge(tmp_path, monkeypatch, "verifier.preset=gpt4o",
                       'verifier.preset_overrides=["provider=openrouter","model.name=openai/gpt-4o"]')
    assert (routed["model"]["name"], routed["provider"]["name"]) == ("openai/gpt-4o", "openrouter")
    # the same model and provider given whole is the same verifier: a preset is not part of a score's identity
    whole = {**judge, "preset": None}
    assert identity(judge) == identity(whole) != identity(routed)


@pytest.mark.parametrize("overrides, needles", [
    (("verifier.preset=gpt5",), ("Could not find 'model/gpt5'", "choose a model preset: deepseek, gemini, gpt4o")),
    (("verifier.preset=gpt4o", 'verifier.preset_overrides=["model.nme=x"]'), ("Could not override 'model.nme'",
                                                                              "conf/model_defaults/common.yaml")),
    (('verifier.preset_overrides=["model.name=x"]',), ("verifier.preset is not", "verifier.preset=gpt4o")),
    (("verifier.preset=gpt4o", "verifier.model={name: x}"), ("are both given", "give the judge's model one way")),
])
def test_a_bad_preset_is_refused_before_any_work(tmp_path: Path, overrides, needles) -> None:
    data = write_dataset(tmp_path / "j.jsonl", [{"prompt": "RUN: echo hi\nGreet"}])
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=jp", "sandbox=local", "verifier=judge", *overrides)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in result.stderr
    assert not (tmp_path / "outputs" / "jp" / "ledger.db").exists()


def test_a_row_cannot_choose_the_preset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings, _ = _judge(tmp_path, monkeypatch)
    options = load_options(settings, config_dir())
    with pytest.raises(ConfigError, match="cannot choose the judge's model preset"):
        effective(options, "judge", {"verifier": {"kind": "judge", "preset": "gpt4o"}})


def test_the_judge_calls_the_presets_model_while_the_agent_calls_its_own(tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "j.jsonl", [{"prompt": "RUN: echo hello world\nGreet", "rubric": "Says hello."}])
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=jr", "sandbox=local", "filters=none", "verifier=judge",
                     f"model.base_url={mock_server.base_url}", "verifier.preset=vllm_local",
                     f'verifier.preset_overrides=["model.base_url={mock_server.base_url}","model.name=judge-x"]')
    assert result.returncode == 0, result.stderr
    bodies = [json.loads(line)["body"] for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    judged = [b for b in bodies if "<rubric>" in b["messages"][-1]["content"]]
    assert [b["model"] for b in judged] == ["judge-x"]
    assert judged[0]["top_k"] == 20  # the vllm_local preset's sampling, not the agent's
    assert {b["model"] for b in bodies if b not in judged} == {"mock"}
    [row] = read_jsonl(tmp_path / "outputs" / "jr" / "trajectories.jsonl")
    assert row["reward"] is not None
