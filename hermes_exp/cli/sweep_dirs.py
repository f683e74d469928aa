"""Hydra callback (`hydra.callbacks.sweep_dirs`): every job of a `-m` sweep gets a directory of its own.

A job's directory is named by its override values minus the keys that do not change results
(`hydra.job.config.override_dirname.exclude_keys`), so that re-issuing a sweep resumes every job. A
sweep over one of those keys (`-m samples_per_prompt=1,2`, `-m num_workers=1,8`) would therefore send
several jobs into one directory, where each later job resumes, extends or re-exports the earlier one's run
and the sweep summary counts one run twice. Such a sweep is refused before any job starts.

With `outputs.private=true` the sweep directory itself is made owner-only before any job writes into it
(multirun.yaml, the sweep summary, the sweep budget's book), as each job makes its own run directory."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from hermes_exp.errors import ConfigError

HINTS = {
    "samples_per_prompt": "run once with the largest value: statistics.json reports pass@k for every smaller k",
}
GENERIC = ("run one job per value, one after another, each with a run_name of its own "
           "(hermes-exp KEY=VALUE run_name=NAME); keys that change results (model, distribution, ...) "
           "can be swept")


class SweepDirs(Callback):
    def on_multirun_start(self, config: Any, **_: Any) -> None:
        try:
            check_sweep(list(config.hydra.overrides.task),
                        list(config.hydra.job.config.override_dirname.exclude_keys))
        except ConfigError as exc:  # Hydra would print a traceback of its own callback machinery
            print(f"error: {exc}", file=sys.stderr)
            raise SystemExit(exc.exit_code) from None
        if (config.get("outputs") or {}).get("private"):
            from hermes_exp.settings.file_modes import make_private

            make_private(Path(config.hydra.sweep.dir))

    def on_job_start(self, config: Any, **_: Any) -> None:
        """multirun.yaml is saved by the launcher after the sweep started: owner-only too."""
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hydra_cfg = HydraConfig.get()
        if hydra_cfg.mode != RunMode.MULTIRUN or not (config.get("outputs") or {}).get("private"):
            return
        saved = Path(hydra_cfg.sweep.dir) / "multirun.yaml"
        try:
            saved.chmod(0o600)
        except FileNotFoundError:  # a launcher that keeps no multirun.yaml
            pass


def check_sweep(overrides: list[str], excluded: list[str]) -> None:
    """Raise ConfigError for the first swept key (more than one value) that is left out of job dirs."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    for override in OverridesParser.create().parse_overrides(overrides):
        key = override.key_or_group
        if key not in excluded or not override.is_sweep_override():
            continue
        values = list(override.sweep_string_iterator())
        if len(set(values)) > 1:
            raise ConfigError(
                f"-m {key}={','.join(values)}: {key} does not change a run's results, so it is left out of "
                f"job directory names and every job of this sweep would share one directory "
                f"(each later job resuming the earlier one's run)",
                HINTS.get(key, GENERIC.replace("KEY=VALUE", f"{key}={values[0]}")))
