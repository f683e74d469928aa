"""`hermes-exp --list-distributions`: the shipped distributions and the toolsets with their tools."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from hermes_exp.tools.registry import TOOLSETS


def print_listing(conf_dir: Path) -> None:
    print("Distributions (toolset: probability %; each drawn independently, at least one always):")
    for path in sorted((conf_dir / "distribution").glob("*.yaml")):
        dist = OmegaConf.load(path)
        sets = ", ".join(f"{ts}: {p:g}" for ts, p in dist.toolsets.items())
        print(f"  {path.stem:<16} {sets}   ({dist.get('description', '')})")
    print("\nToolsets and their tools:")
    for name, tools in TOOLSETS.items():
        print(f"  {name:<16} {', '.join(tools)}")
    print("\nChoose one with distribution=NAME; add your own as conf/distribution/NAME.yaml.")
