"""A `+key=value` that is a typo of a key the config has is refused with the key it probably meant.
Hydra answers `max_turn=3` with "To append to your config use +max_turn=3": following that advice ran
with max_turns at its default and the typo unread, without a word."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import request_count, run_cli, write_dataset
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from hermes_exp.cli.added_keys import check
from hermes_exp.settings.paths import config_dir, register_resolvers
from hermes_exp.errors import ConfigError


def composed(overrides: list[str]) -> dict:
    register_resolvers()
    with initialize_config_dir(str(config_dir()), version_base=None):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
        groups = {choice.split("@")[0] for choice in cfg.hydra.runtime.choices}
    settings = OmegaConf.to_container(cfg, resolve=False)
    settings.pop("hydra")
    return settings, groups


@pytest.mark.parametrize("override, meant", [
    ("+max_turn=3", "max_turns"), ("+num_worker=8", "num_workers"), ("+seeds=1", "seed"),
    ("+model.temprature=0.5", "model.sampling.temperature"), ("+sandbox.memroy_mb=100", "sandbox.memory_mb"),
    ("+modle.name=x", "model.name"), ("+provider.headers.X-Titel=me", "provider.headers.X-Title"),
])
def test_a_typo_added_with_plus_is_refused_with_the_key_it_meant(override: str, meant: str) -> None:
    settings, groups = composed([override, "provider=openrouter"])
    with pytest.raises(ConfigError) as err:
        check(settings, [override, "provider=openrouter"], groups)
    key, value = override[1:].split("=")
    assert err.value.message == f"+{key} adds a key nothing reads: did you mean {meant}?"
    assert f"set {meant}={value} (without the +)" in err.value.hint and f"++{key}={value}" in err.value.hint


@pytest.mark.parametrize("overrides", [
    ["+mcp.servers.gh.command=npx", "+mcp.servers.gh.args=[-y,@modelcontextprotocol/server-github]",
     "+mcp.servers.gh.env.GITHUB_PERSONAL_ACCESS_TOKEN=GITHUB_TOKEN", "+distribution.toolsets.gh=100"],
    ["+compress.model.name=google/gemini-2.5-flash"], ["+toolset@toolsets.extra=terminal"],
    ["+mcp.servers.remote.url=https://host/mcp", "+mcp.servers.remote.headers_env.Authorization=MCP_AUTH"],
    ["+model.extra_body.top_k=5"], ["+provider.headers.X-Foo=bar"], ["+dataset.fields.expected=answer"],
    ["+sandbox.env.HOME2=x"], ["++max_turn=3"], ["max_turns=3"],
])
def test_the_documented_additions_pass(overrides: list[str]) -> None:
    settings, groups = composed(overrides)
    check(settings, overrides, groups)


def test_the_cli_refuses_the_typo_before_any_work_and_plus_plus_adds_on_purpose(tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "Greet"}])
    args = [f"dataset.path={data}", "run_name=ak", "sandbox=local", f"model.base_url={mock_server.base_url}"]
    result = run_cli(tmp_path, *args, "+max_turn=3")
    assert result.returncode == 2, result.stderr
    assert "error: +max_turn adds a key nothing reads: did you mean max_turns?" in result.stderr
    assert not (tmp_path / "outputs" / "ak" / "ledger.db").exists()
    assert request_count(tmp_path / "requests.jsonl") == 0
    assert run_cli(tmp_path, *args, "++max_turn=3").returncode == 0
