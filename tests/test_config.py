"""Every option of every config group composes and instantiates (real Hydra composition)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf, open_dict
from hydra.utils import instantiate

from hermes_exp.settings.paths import config_dir, register_resolvers
from hermes_exp.tools.distribution import validate
from hermes_exp.errors import ConfigError
from hermes_exp.run.checks import check
from hermes_exp.settings.resolved import IDENTITY_KEYS, identity_hash, to_plain
from hermes_exp.agent.control import AGENTS
from hermes_exp.verify.base import VerifyContext
from hermes_exp.verify.registry import build
from hermes_exp.tools.readiness import drawable, uses_mock
from hermes_exp.tools.registry import Registry

CONF = config_dir()
GROUPS = ["model", "provider", "distribution", "sandbox", "filters", "executor", "verifier", "agent"]
OPTIONS = [(g, p.stem) for g in GROUPS for p in sorted((CONF / g).glob("*.yaml"))]
TOOLSETS = sorted(p.stem for p in (CONF / "toolset").glob("*.yaml"))


def _compose(overrides: list[str]):
    """Compose as the app does; `${hydra:...}` resolves because the Hydra config is registered."""
    register_resolvers()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose(config_name="config", overrides=overrides, return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


@pytest.mark.parametrize("group, option", OPTIONS, ids=[f"{g}={o}" for g, o in OPTIONS])
def test_option_composes_and_instantiates(group: str, option: str, tmp_path: Path) -> None:
    cfg = _compose([f"{group}={option}", f"hydra.run.dir={tmp_path}"])
    settings = to_plain(cfg)
    assert settings["model"]["name"] and settings["provider"]["name"]
    validate(settings["distribution"]["name"], settings["distribution"]["toolsets"])
    registry = Registry.from_settings(settings)
    named = {ts for ts, p in settings["distribution"]["toolsets"].items() if p > 0}
    if uses_mock(settings) and named & set(registry.toolsets):  # the mock demo runs it
        assert set(drawable(settings, registry)) == named & set(registry.toolsets)
    elif uses_mock(settings):  # only toolsets this build lacks (browser before it lands): refused, said why
        with pytest.raises(ConfigError, match="no such toolset is defined"):
            drawable(settings, registry)
    if group == "sandbox" and option == "docker":
        pytest.importorskip("docker")
    instantiate(settings["sandbox"], run_id="hx-test")
    instantiate(settings["executor"])
    [instantiate(rule) for rule in settings["filters"]["rules"]]
    assert settings["agent"]["kind"] in AGENTS
    if settings["verifier"].get("_target_"):
        verifier = build(settings["verifier"], VerifyContext())
        assert verifier.needs_sandbox == (option == "command") or group != "verifier"
    assert identity_hash(settings).startswith("id1:")


@pytest.mark.parametrize("group, option", OPTIONS, ids=[f"{g}={o}" for g, o in OPTIONS])
def test_option_passes_the_full_check_a_run_makes(group: str, option: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """settings.check, as the CLI runs it before any work: an option that composes but fails it is a bug."""
    overrides = [f"{group}={option}", f"hydra.run.dir={tmp_path}"]
    settings = to_plain(_compose(overrides))
    if not uses_mock(settings):
        # A real model's default distribution draws web toolsets whose backends a user names (search URL,
        # keys): the preset itself is checked with a distribution that needs none.
        settings = to_plain(_compose([*overrides, "distribution=terminal_only"]))
    if settings["provider"].get("api_key_env"):
        monkeypatch.setenv(settings["provider"]["api_key_env"], "sk-test")  # read from the environment only
    drawn = check(settings)
    assert drawn and set(drawn) <= set(settings["distribution"]["toolsets"])


def test_model_presets_bring_their_provider() -> None:
    assert _compose(["model=sonnet"]).provider.name == "openrouter"
    assert _compose(["model=sonnet"]).model.name == "anthropic/claude-sonnet-4.6"
    assert _compose(["model=gpt4o"]).provider.name == "openai"
    assert _compose(["model=sonnet", "provider=openai"]).provider.name == "openai"


def test_identity_ignores_workers_and_paths_but_not_turns(tmp_path: Path) -> None:
    def ident(*overrides: str) -> str:
        cfg = _compose([*overrides, f"hydra.run.dir={tmp_path}"])
        return identity_hash(to_plain(cfg))

    base = ident()
    assert ident("num_workers=32", "batch_size=3", "executor=processes", "run_name=x") == base
    assert ident("model.mock_server.latency_ms=200", "provider.api_key_env=OTHER") == base
    assert ident("model.base_url=http://127.0.0.1:1234/v1") == base  # an endpoint, not a result
    assert ident("max_turns=11") != base
    assert ident("seed=1") != base
    assert ident("distribution=minimal") != base
    # Scores live beside results: neither the verifier nor the number of samples is in the identity.
    assert ident("verifier=command", "verifier.timeout_seconds=5") == base
    assert ident("samples_per_prompt=4") == base
    assert ident("agent=model") == base and ident("agent=oracle") != base and ident("agent=nop") != ident("agent=oracle")


def _set(tree: dict, dotted: str, value: object) -> None:
    *parents, leaf = dotted.split(".")
    for part in parents:
        if not isinstance(tree.get(part), dict):
            tree[part] = {}
        tree = tree[part]
    tree[leaf] = value


def test_keys_left_out_of_sweep_dir_names_are_not_part_of_the_identity(tmp_path: Path) -> None:
    """A job's directory is named by its overrides minus exclude_keys, and a directory holds one experiment:
    a key that changes the identity must stay in the name (so -m over it never mixes experiments in one
    ledger), hence every excluded key is one settings.NOT_IDENTITY (or IDENTITY_KEYS) leaves out."""
    excluded = list(OmegaConf.load(CONF / "config.yaml").hydra.job.config.override_dirname.exclude_keys)
    base = to_plain(_compose([f"hydra.run.dir={tmp_path}"]))
    identity = identity_hash(base)
    for key in excluded:
        changed = copy.deepcopy(base)
        _set(changed, key, "hx-another-value")
        assert identity_hash(changed) == identity, f"{key} is part of the identity but left out of sweep dir names"
    # The rule holds for the never-saved keys too: ephemeral_system_prompt and prefill_messages change
    # results, so they name sweep directories (their values appear in the name though never in a file).
    for key in IDENTITY_KEYS:
        assert key not in excluded
    changed = copy.deepcopy(base)
    _set(changed, "ephemeral_system_prompt", "be brief")
    assert identity_hash(changed) != identity


def test_docker_throughput_options_compose_and_leave_the_identity_alone(tmp_path: Path) -> None:
    """sandbox.warm_pool, max_starts_per_second, remove_in_background and runtime: composed, instantiated,
    checked, and not part of the run identity (they change how fast containers come and go, or which
    OCI runtime starts the same container, not what a task sees)."""
    pytest.importorskip("docker")
    base = to_plain(_compose(["sandbox=docker", f"hydra.run.dir={tmp_path}"]))
    assert base["sandbox"]["remove_in_background"] is True and base["sandbox"]["warm_pool"] == 0
    assert base["sandbox"]["runtime"] is None
    overrides = ["sandbox.warm_pool=2", "sandbox.max_starts_per_second=5", "sandbox.remove_in_background=false",
                 "sandbox.runtime=crun"]
    settings = to_plain(_compose(["sandbox=docker", *overrides, f"hydra.run.dir={tmp_path}"]))
    factory = instantiate(settings["sandbox"], run_id="hx-test")
    assert factory.pool.size == 2 and factory._remover is None and factory._start_rate.interval == 0.2
    assert factory._limits.runtime == "crun"
    assert identity_hash(settings) == identity_hash(base)
    check(settings)
    bad = to_plain(_compose(["sandbox=docker", "sandbox.remove_in_background=sometimes", f"hydra.run.dir={tmp_path}"]))
    with pytest.raises(Exception, match="sandbox.remove_in_background='sometimes' must be true, false or null"):
        instantiate(bad["sandbox"], run_id="hx-test")  # Hydra wraps the ConfigError


@pytest.mark.parametrize("toolset", TOOLSETS)
def test_every_toolset_composes_into_the_registry(toolset: str, tmp_path: Path) -> None:
    """Each conf/toolset/*.yaml is in the default config (and so known to every run); each of its
    tools is built from its `_target_` with an explicit schema keyed by the tool's name."""
    settings = to_plain(_compose([f"hydra.run.dir={tmp_path}"]))
    registry = Registry.from_settings(settings)
    tools = registry.toolsets[toolset].tools
    assert tools and list(tools) == list(settings["toolsets"][toolset]["tools"])
    for name, tool in tools.items():
        assert tool.schema["name"] == name and tool.schema["parameters"]["type"] == "object"
        assert tool.missing(True) is None  # the mock server stands in for every backend
    assert {t["function"]["name"] for t in registry.schemas([toolset])} == set(tools)
