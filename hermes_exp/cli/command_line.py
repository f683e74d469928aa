"""What the `hermes-exp` command answers before Hydra starts: `--help` (the usage, the config groups with
their options, where the settings are), `--version` (hermes-exp's), and a `run_name=` given a value YAML
would type (true, 2024, 1e3) read as the text typed. `--hydra-help` and `--cfg` stay Hydra's."""

from __future__ import annotations

import platform
import textwrap
from importlib import metadata
from pathlib import Path
from typing import Any

HELP_FLAGS = ("--help", "-h")
VERSION_FLAG = "--version"
WIDTH = 104
HIDDEN = {"model_defaults"}  # pulled in by each model preset, never chosen on the command line
# What each group decides (its options are the files in conf/GROUP/); a group not named here is listed too.
GROUPS = {
    "model": "the LLM: model id, endpoint, API key variable, sampling",
    "provider": "the endpoint's routing (a model preset names its own)",
    "distribution": "which toolsets a prompt may draw (hermes-exp --list-distributions)",
    "sandbox": "where tool commands run",
    "verifier": "how a finished sample is scored (a dataset row may name its own)",
    "filters": "which finished samples are kept in the outputs",
    "executor": "how sessions run in parallel",
    "agent": "model, or a control run: oracle (the row's solution), nop",
    "toolset": "the toolsets a run knows (add one: +toolset@toolsets.NAME=NAME)",
}


def answers(argv: list[str]) -> bool:
    return any(arg in HELP_FLAGS or arg == VERSION_FLAG for arg in argv)


def answer(argv: list[str], conf_dir: Path) -> int:
    """Print the help or the version (the help when both are asked); the exit code."""
    print(help_text(conf_dir) if any(arg in HELP_FLAGS for arg in argv) else version_text())
    return 0


def version_text() -> str:
    import hydra

    try:
        mine = metadata.version("hermes-exp")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        mine = "(not installed)"
    return f"hermes-exp {mine} (Hydra {hydra.__version__}, Python {platform.python_version()})"


def help_text(conf_dir: Path) -> str:
    from omegaconf import OmegaConf

    primary = OmegaConf.load(conf_dir / "config.yaml")
    about = OmegaConf.select(primary, "hydra.help", default=None) or {}
    lines = [str(about.get("header") or "").rstrip(), "",
             "usage: hermes-exp [GROUP=OPTION | KEY=VALUE ...]      one run, in outputs/<run_name>/",
             "       hermes-exp -m GROUP=A,B KEY=X,Y ...              a sweep: one job per combination", "",
             "Config groups (GROUP=OPTION; [the default]):"]
    defaults = _defaults(primary.get("defaults") or [])
    for group in sorted(p.name for p in conf_dir.iterdir() if p.is_dir() and any(p.glob("*.yaml"))):
        if group in HIDDEN:
            continue
        options = sorted(f.stem for f in (conf_dir / group).glob("*.yaml"))
        shown = ", ".join(f"[{o}]" if o in defaults.get(group, ()) else o for o in options)
        lines += [f"  {group:<13} {GROUPS.get(group, '')}".rstrip(),
                  textwrap.fill(shown, width=WIDTH, initial_indent=" " * 16, subsequent_indent=" " * 16)]
    lines += ["",
              "Settings (KEY=VALUE, e.g. max_turns=20 dataset.path=data/p.jsonl run_name=x):",
              "  every key with its value:   hermes-exp --cfg job [GROUP=OPTION ...]",
              f"  every key explained:        {conf_dir / 'config.yaml'} and {conf_dir}/GROUP/OPTION.yaml",
              "  Hydra's flags (--cfg, --config-path, --multirun, ...): hermes-exp --hydra-help", "",
              str(about.get("footer") or "").rstrip()]
    return "\n".join(lines).strip() + "\n"


def _defaults(entries: Any) -> dict[str, set[str]]:
    """group -> the options the defaults list chooses (`toolset@toolsets.web: web`: group toolset)."""
    chosen: dict[str, set[str]] = {}
    for entry in entries:
        if hasattr(entry, "items"):
            for key, option in entry.items():
                group = str(key).split()[-1].split("@")[0]
                chosen.setdefault(group, set()).add(str(option))
    return chosen


def run_name_as_text(argv: list[str]) -> list[str]:
    """`run_name=true` or `run_name=2024` is the name typed: quoted, so Hydra keeps it text (the run
    directory is outputs/true, not outputs/True; 1e3 stays 1e3, not 1000.0). Sweeps are left alone."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    out = []
    for arg in argv:
        key, sep, text = arg.partition("=")
        if sep and key.lstrip("+") == "run_name" and not arg.startswith("-") and text:
            try:
                override = OverridesParser.create().parse_override(arg)
            except Exception:  # noqa: BLE001 - Hydra parses it again and reports what is wrong
                override = None
            if override is not None and not override.is_sweep_override() and \
                    isinstance(override.value(), (bool, int, float)):
                arg = f"{key}='{text}'"
        out.append(arg)
    return out
