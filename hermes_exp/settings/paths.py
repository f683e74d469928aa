"""Where hermes-exp's own files are: the shipped configs (`conf/`) and the demo dataset, and the resolver
that names the demo dataset in `conf/config.yaml`."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

PACKAGE = Path(__file__).resolve().parent.parent


def config_dir() -> Path:
    """The shipped configs: inside the package in a wheel, beside it in a source checkout."""
    for candidate in (PACKAGE / "conf", PACKAGE.parent / "conf"):
        if (candidate / "config.yaml").is_file():
            return candidate
    raise RuntimeError(f"hermes-exp's configs are missing (looked in {PACKAGE / 'conf'} and {PACKAGE.parent / 'conf'})")


def register_resolvers() -> None:
    demo = PACKAGE / "data" / "demo_prompts.jsonl"
    if not OmegaConf.has_resolver("hx_demo_dataset"):
        OmegaConf.register_new_resolver("hx_demo_dataset", lambda: str(demo))
