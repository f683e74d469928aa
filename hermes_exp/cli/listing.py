"""`hermes-exp --list-distributions [overrides]`: the shipped distributions, and every toolset with its
tools and whether its backend is configured for the composed config (e.g. with `model=sonnet`)."""

from __future__ import annotations

import sys
from pathlib import Path

from omegaconf import OmegaConf

from hermes_exp.errors import HermesExpError
from hermes_exp.tools.readiness import problems, uses_mock
from hermes_exp.tools.registry import Registry


def compose_settings(conf_dir: Path, overrides: list[str]) -> dict:
    """The run config as `hermes-exp OVERRIDES` would resolve it (without starting a run)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from hermes_exp.settings.paths import register_resolvers
    from hermes_exp.settings.resolved import to_plain

    register_resolvers()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf_dir), version_base=None):
        cfg = compose(config_name="config", overrides=overrides, return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)  # `${hydra:...}` resolves as in a run
    with open_dict(cfg):
        del cfg["hydra"]
    return to_plain(cfg)


def print_listing(conf_dir: Path, overrides: list[str] | None = None) -> None:
    print("Distributions (toolset: probability %; each drawn independently, at least one always):")
    for path in sorted((conf_dir / "distribution").glob("*.yaml")):
        dist = OmegaConf.load(path)
        sets = ", ".join(f"{ts}: {p:g}" for ts, p in dist.toolsets.items())
        print(f"  {path.stem:<15} {sets}   ({dist.get('description', '')})")
    settings = compose_settings(conf_dir, overrides or [])
    registry = Registry.from_settings(settings)
    mock = uses_mock(settings)
    model = (settings.get("model") or {}).get("name", "?")
    print(f"\nToolsets and their tools (backend status for model={model}):")
    found = problems(registry, dict.fromkeys(registry.toolsets, 1.0), mock)  # 10 tools, one reason: said once
    for name, toolset in registry.toolsets.items():
        status = "NOT CONFIGURED: " + "; ".join(found[name]) if name in found else "ready"
        print(f"  {name:<15} {', '.join(toolset.tools)}\n  {'':<15} {toolset.description}; {status}")
    if mock:
        print("  (model=mock: the built-in mock server stands in for every tool backend left unset)")
    print("\nChoose one with distribution=NAME; add your own as conf/distribution/NAME.yaml. A real model's "
          "status: hermes-exp --list-distributions model=sonnet")


def main(conf_dir: Path, overrides: list[str]) -> int:
    from hermes_exp.cli.hydra_errors import translated

    try:
        with translated(overrides):  # model=gpt5: the options, not Hydra's traceback
            print_listing(conf_dir, overrides)
    except HermesExpError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0
