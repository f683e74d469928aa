"""The run's config snapshot, `<run_dir>/.hydra/` (config.yaml, hydra.yaml, overrides.yaml), written by
the CLI once an invocation holds the run directory; left as it is when it would be written the same."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from hermes_exp.settings.file_modes import make_dir
from hermes_exp.store.atomic import atomic_writer


def save(cfg: DictConfig) -> None:
    """Write `<run_dir>/.hydra/` (config.yaml, hydra.yaml, overrides.yaml) once this invocation holds
    the run directory; Hydra's own saving is off (`hydra.output_subdir: null`) because it happens
    before the lock, so a refused second invocation would overwrite the running run's snapshot.
    config.yaml reproduces the run on its own: it carries our run/sweep directory rules."""
    from hydra.core.hydra_config import HydraConfig

    hydra_cfg = HydraConfig.get()
    out = Path(hydra_cfg.runtime.output_dir) / ".hydra"
    make_dir(out)
    config, hydra = OmegaConf.to_container(cfg, resolve=False), OmegaConf.to_container(hydra_cfg, resolve=False)
    key = _snapshot_digest(config, hydra)
    if key is not None and _snapshot_current(out, key):  # the same invocation as the last one: its files are these
        return
    saved, header = _saved_config(config)
    hydra_node, overrides = _saved_hydra(hydra, list(hydra_cfg.overrides.task))
    files = {"config.yaml": saved, "hydra.yaml": hydra_node, "overrides.yaml": OmegaConf.create(overrides)}
    for name, node in files.items():
        with atomic_writer(out / name) as fh:
            fh.write((header if name == "config.yaml" else "") + OmegaConf.to_yaml(node))
    if key is not None:
        with atomic_writer(out / SNAPSHOT_KEY) as fh:
            fh.write(json.dumps({"key": key, "files": _stats(out)}))
    else:
        (out / SNAPSHOT_KEY).unlink(missing_ok=True)


def _saved_config(config: object) -> tuple[DictConfig, str]:
    """config.yaml's content (with our run/sweep directory rules) and the header written above it."""
    from hermes_exp.settings.paths import config_dir

    saved = OmegaConf.create(config)
    saved.hydra = OmegaConf.load(config_dir() / "config.yaml").hydra
    header = ""
    if saved.get("ephemeral_system_prompt"):  # sent, never saved: the snapshot says so instead
        saved.ephemeral_system_prompt = None
        header = ("# ephemeral_system_prompt was set: it is sent, never saved; pass it again to reproduce "
                  "this run\n")
    if "action" in saved:  # the snapshot reproduces the run: it runs, whatever verb the last run was given
        saved.action = "run"
    return saved, header


def _saved_hydra(hydra: object, task: list[str]) -> tuple[DictConfig, list[str]]:
    """hydra.yaml's content and the saved overrides: the command line's `task` overrides without the
    action and with never-saved values left out, in the overrides and the override dirname alike."""
    hydra_node = OmegaConf.create({"hydra": hydra})
    given = [o for o in task if not _is_action(o)]
    hydra_node.hydra.overrides.task = overrides = [_unsaved(o) for o in given]
    dirname = hydra_node.hydra.job.get("override_dirname") or ""
    for o in task:
        if _is_action(o):
            dirname = ",".join(part for part in dirname.split(",") if part != o.lstrip("+~"))
    for o, kept in zip(given, overrides):
        dirname = dirname.replace(o.lstrip("+~"), kept)
    hydra_node.hydra.job.override_dirname = dirname
    return hydra_node, overrides


SNAPSHOT_KEY = ".snapshot-key"  # what the snapshot was made from (a digest), and its files as written
SNAPSHOT_FILES = ("config.yaml", "hydra.yaml", "overrides.yaml")


def _snapshot_digest(config: object, hydra: object) -> str | None:
    """A digest of what the snapshot is made of; None when the config cannot be put in JSON order (keys
    of mixed types): then it is written every time, as before."""
    try:
        text = json.dumps([config, hydra], sort_keys=True, default=str)
    except (TypeError, ValueError):
        return None
    from hermes_exp.settings.paths import config_dir

    return hashlib.blake2b(text.encode() + (config_dir() / "config.yaml").read_bytes(), digest_size=16).hexdigest()


def _stats(out: Path) -> dict[str, list[int]]:
    stats = {}
    for name in SNAPSHOT_FILES:
        try:
            st = (out / name).stat()
        except OSError:
            continue
        stats[name] = [st.st_size, st.st_mtime_ns]
    return stats


def _snapshot_current(out: Path, key: str) -> bool:
    """Whether `.hydra/` holds the snapshot of this exact config and Hydra config (the digest), its
    files untouched since they were written (so writing them again would change nothing)."""
    try:
        kept = json.loads((out / SNAPSHOT_KEY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    stats = _stats(out)
    return isinstance(kept, dict) and kept.get("key") == key and len(stats) == len(SNAPSHOT_FILES) \
        and kept.get("files") == stats


def _is_action(override: str) -> bool:
    return override.split("=", 1)[0].lstrip("+~") == "action"


def _unsaved(override: str) -> str:
    """A command-line override with the never-saved value left out."""
    key = override.split("=", 1)[0].lstrip("+~")
    return f"{key}=<sent, not saved>" if key == "ephemeral_system_prompt" else override
