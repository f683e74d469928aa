"""Every conf/sandbox/*.yaml instantiates as the runner does it (`instantiate(cfg, run_id=...)`),
cheaply: building a factory starts nothing and contacts no engine."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from hermes_exp.sandbox.auto import AutoSandboxFactory
from hermes_exp.sandbox.bwrap import BwrapSandboxFactory
from hermes_exp.sandbox.docker import DockerSandboxFactory
from hermes_exp.sandbox.local import LocalSandboxFactory

CONF = Path(__file__).resolve().parents[2] / "conf" / "sandbox"
EXPECTED = {"local": LocalSandboxFactory, "bwrap": BwrapSandboxFactory,
            "docker": DockerSandboxFactory, "auto": AutoSandboxFactory}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_sandbox_yaml_instantiates(name: str) -> None:
    cfg = OmegaConf.load(CONF / f"{name}.yaml")
    assert cfg.kind == name
    factory = instantiate(cfg, run_id="run-123")
    assert isinstance(factory, EXPECTED[name])
    for method in ("open", "shutdown", "preflight"):
        assert callable(getattr(factory, method))


def test_docker_yaml_keys_reach_the_factory() -> None:
    cfg = OmegaConf.load(CONF / "docker.yaml")
    cfg.base_url = "unix:///nonexistent/docker.sock"  # construction must not connect
    cfg.image = "some/image:tag"
    factory = instantiate(cfg, run_id="run-123", unknown_key="ignored")
    assert factory.image == "some/image:tag" and factory.run_id == "run-123"


def test_sandbox_yaml_files_are_all_tested() -> None:
    assert {p.stem for p in CONF.glob("*.yaml")} == set(EXPECTED)
