"""The `hermes-exp` command: a Hydra app. Nothing but argument handling and error reporting."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from hermes_exp.errors import HermesExpError
from hermes_exp.redact import Redactor
from hermes_exp.store.atomic import atomic_writer

log = logging.getLogger("hermes_exp")
# Sweep jobs may run in other processes (hydra/launcher=joblib, submitit): each appends its exit
# code to this file, so the command's own exit code reflects every job.
STATUS_ENV = "HERMES_EXP_STATUS_FILE"
STATUS_PREFIX = "hermes-exp-status-"  # + the pid of the invocation that made it


def config_dir() -> Path:
    """The shipped configs: inside the package in a wheel, beside it in a source checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "conf", here.parent / "conf"):
        if (candidate / "config.yaml").is_file():
            return candidate
    raise RuntimeError(f"hermes-exp's configs are missing (looked in {here / 'conf'} and {here.parent / 'conf'})")


def register_resolvers() -> None:
    demo = Path(__file__).resolve().parent / "data" / "demo_prompts.jsonl"
    if not OmegaConf.has_resolver("hx_demo_dataset"):
        OmegaConf.register_new_resolver("hx_demo_dataset", lambda: str(demo))


def _snapshot(cfg: DictConfig) -> None:
    """Write `<run_dir>/.hydra/` (config.yaml, hydra.yaml, overrides.yaml) once this invocation holds
    the run directory; Hydra's own saving is off (`hydra.output_subdir: null`) because it happens
    before the lock, so a refused second invocation would overwrite the running run's snapshot.
    config.yaml reproduces the run on its own: it carries our run/sweep directory rules."""
    from hydra.core.hydra_config import HydraConfig

    hydra_cfg = HydraConfig.get()
    out = Path(hydra_cfg.runtime.output_dir) / ".hydra"
    out.mkdir(parents=True, exist_ok=True)
    config, hydra = OmegaConf.to_container(cfg, resolve=False), OmegaConf.to_container(hydra_cfg, resolve=False)
    key = _snapshot_digest(config, hydra)
    if key is not None and _snapshot_current(out, key):  # the same invocation as the last one: its files are these
        return
    saved = OmegaConf.create(config)
    saved.hydra = OmegaConf.load(config_dir() / "config.yaml").hydra
    header = ""
    if saved.get("ephemeral_system_prompt"):  # sent, never saved: the snapshot says so instead
        saved.ephemeral_system_prompt = None
        header = ("# ephemeral_system_prompt was set: it is sent, never saved; pass it again to reproduce "
                  "this run\n")
    hydra_node = OmegaConf.create({"hydra": hydra})
    hydra_node.hydra.overrides.task = overrides = [_unsaved(o) for o in hydra_cfg.overrides.task]
    dirname = hydra_node.hydra.job.get("override_dirname") or ""
    for given, kept in zip(hydra_cfg.overrides.task, overrides):
        dirname = dirname.replace(given.lstrip("+~"), kept)
    hydra_node.hydra.job.override_dirname = dirname
    files = {"config.yaml": saved, "hydra.yaml": hydra_node, "overrides.yaml": OmegaConf.create(overrides)}
    for name, node in files.items():
        with atomic_writer(out / name) as fh:
            fh.write((header if name == "config.yaml" else "") + OmegaConf.to_yaml(node))
    if key is not None:
        with atomic_writer(out / SNAPSHOT_KEY) as fh:
            fh.write(json.dumps({"key": key, "files": _stats(out)}))
    else:
        (out / SNAPSHOT_KEY).unlink(missing_ok=True)


SNAPSHOT_KEY = ".snapshot-key"  # what the snapshot was made from (a digest), and its files as written
SNAPSHOT_FILES = ("config.yaml", "hydra.yaml", "overrides.yaml")


def _snapshot_digest(config: object, hydra: object) -> str | None:
    """A digest of what the snapshot is made of; None when the config cannot be put in JSON order (keys
    of mixed types): then it is written every time, as before."""
    try:
        text = json.dumps([config, hydra], sort_keys=True, default=str)
    except (TypeError, ValueError):
        return None
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


def _unsaved(override: str) -> str:
    """A command-line override with the never-saved value left out."""
    key = override.split("=", 1)[0].lstrip("+~")
    return f"{key}=<sent, not saved>" if key == "ephemeral_system_prompt" else override


def _job(cfg: DictConfig) -> None:
    from hermes_exp.run import run
    from hermes_exp.settings import to_plain

    try:
        _report_status(run(to_plain(cfg), on_locked=lambda: _snapshot(cfg)))
    except HermesExpError as exc:
        redact = Redactor.from_env(OmegaConf.to_container(cfg, resolve=False))
        print(f"error: {redact(str(exc))}", file=sys.stderr)
        _report_status(exc.exit_code)
    except KeyboardInterrupt:
        print("interrupted before any task ran; nothing was changed", file=sys.stderr)
        _report_status(130)


def _report_status(code: int) -> None:
    path = os.environ.get(STATUS_ENV)
    if path:
        from hermes_exp.sweep import status_line

        with open(path, "a", encoding="utf-8") as fh:  # one short append: atomic across processes
            fh.write(status_line(code))


def _reap_status_files() -> None:
    """Remove status files of invocations that died without cleaning up (SIGKILL): the pid in the
    name is gone. Files of the older, pid-less naming are removed once a day old."""
    for path in Path(tempfile.gettempdir()).glob(STATUS_PREFIX + "*"):
        pid = path.name[len(STATUS_PREFIX):].split("-")[0]
        try:
            if pid.isdigit():
                os.kill(int(pid), 0)
                continue
            if time.time() - path.stat().st_mtime < 86400:
                continue
        except ProcessLookupError:
            pass
        except OSError:
            continue
        path.unlink(missing_ok=True)


def main() -> None:
    flags = ("--list-distributions", "--list_distributions", "--list-toolsets")
    if any(a in flags for a in sys.argv[1:]):
        from hermes_exp.listing import main as listing

        register_resolvers()
        sys.exit(listing(config_dir(), [a for a in sys.argv[1:] if a not in flags]))
    register_resolvers()
    started = time.time()
    _reap_status_files()
    fd, status_file = tempfile.mkstemp(prefix=f"{STATUS_PREFIX}{os.getpid()}-")
    os.close(fd)
    os.environ[STATUS_ENV] = status_file
    try:
        hydra.main(version_base=None, config_path=str(config_dir()), config_name="config")(_job)()
        from hermes_exp.sweep import finish

        code = finish(Path(status_file).read_text(), since=started)
    finally:
        os.unlink(status_file)
    sys.exit(code)


if __name__ == "__main__":
    main()
