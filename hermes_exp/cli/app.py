"""The `hermes-exp` command: a Hydra app. Nothing but argument handling and error reporting."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from hermes_exp.cli import command_line
from hermes_exp.cli import hydra_errors
from hermes_exp.settings import secrets as secret_guard
from hermes_exp.cli import snapshot
from hermes_exp.cli.compose_once import composed_once
from hermes_exp.errors import HermesExpError
from hermes_exp.settings.paths import config_dir, register_resolvers
from hermes_exp.settings.redact import Redactor

log = logging.getLogger("hermes_exp")
# Sweep jobs may run in other processes (hydra/launcher=joblib, submitit): each appends its exit
# code to this file, so the command's own exit code reflects every job.
STATUS_ENV = "HERMES_EXP_STATUS_FILE"
STATUS_PREFIX = "hermes-exp-status-"  # + the pid of the invocation that made it


def _job(cfg: DictConfig) -> None:
    from hermes_exp.run.invocation import run
    from hermes_exp.settings.resolved import to_plain

    try:
        settings = to_plain(cfg)
        _check_added_keys(settings)
        code = run(settings, on_locked=lambda: snapshot.save(cfg))
        if settings.get("action") == "merge" and code == 0:
            _merged_report(Path(settings["run_dir"]))
        _report_status(code)
    except HermesExpError as exc:
        redact = Redactor.from_env(OmegaConf.to_container(cfg, resolve=False))
        print(f"error: {redact(str(exc))}", file=sys.stderr)
        _report_status(exc.exit_code)
    except KeyboardInterrupt:
        print("interrupted before any task ran; nothing was changed", file=sys.stderr)
        _report_status(130)


def _merged_report(run_dir: Path) -> None:
    """action=merge ends with the merged run's one report (when the report extra is installed)."""
    from hermes_exp.report.render import build_report

    try:
        print(f"  report:       {build_report(run_dir)}", file=sys.stderr)
    except HermesExpError as exc:
        print(f"  no report.html: {exc}", file=sys.stderr)


def _check_added_keys(settings: dict) -> None:
    """A `+key=value` that is a typo of an existing key (Hydra suggests `+` for a misspelt key), and a
    value given to a whole section (`dataset=p.jsonl` for `dataset.path=p.jsonl`)."""
    from hydra.core.hydra_config import HydraConfig

    from hermes_exp.cli import added_keys

    hydra_cfg = HydraConfig.get()
    groups = {choice.split("@")[0] for choice in hydra_cfg.runtime.choices}  # the user's own groups too
    added_keys.check_sections(settings, list(hydra_cfg.overrides.task), _sections())
    added_keys.check(settings, list(hydra_cfg.overrides.task), groups)


def _sections() -> dict[str, list[str]]:
    """The shipped config's sections (`dataset`, `outputs`, ...) and their keys."""
    primary = OmegaConf.to_container(OmegaConf.load(config_dir() / "config.yaml"), resolve=False)
    return {k: list(v) for k, v in primary.items() if isinstance(v, dict) and k != "hydra"}


def _report_status(code: int) -> None:
    path = os.environ.get(STATUS_ENV)
    if path:
        from hermes_exp.cli.sweep import status_line

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
    args = sys.argv[1:]
    if command_line.answers(args):  # --help, --version: hermes-exp's own, before Hydra
        sys.exit(command_line.answer(args, config_dir()))
    flags = ("--list-distributions", "--list_distributions", "--list-toolsets")
    if any(a in flags for a in args):
        from hermes_exp.cli.listing import main as listing

        register_resolvers()
        sys.exit(listing(config_dir(), [a for a in args if a not in flags]))
    register_resolvers()
    sys.argv[1:] = args = command_line.run_name_as_text(args)
    try:  # before Hydra: a sweep writes its job directories (named by the overrides) and multirun.yaml first
        secret_guard.check_overrides(args)
    except HermesExpError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    started = time.time()
    _reap_status_files()
    fd, status_file = tempfile.mkstemp(prefix=f"{STATUS_PREFIX}{os.getpid()}-")
    os.close(fd)
    os.environ[STATUS_ENV] = status_file
    try:
        with composed_once(), hydra_errors.translated(args):
            hydra.main(version_base=None, config_path=str(config_dir()), config_name="config")(_job)()
        from hermes_exp.cli.sweep import finish

        code = finish(Path(status_file).read_text(), since=started)
    except HermesExpError as exc:  # Hydra's own errors (a misspelt key or option), an unwritable run directory
        print(f"error: {exc}", file=sys.stderr)
        code = exc.exit_code
    finally:
        os.unlink(status_file)
    sys.exit(code)


if __name__ == "__main__":
    main()
