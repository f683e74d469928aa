"""The most a run's counts may be. Past these a count is a typo, not an experiment, and it would not fail
but hang: every task of a run is keyed before the first call (~32 bytes each, slots.py), and
executor=processes starts every worker at once. So such a count is refused before any work (exit 2),
naming the key, the value, the limit and the fix."""

from __future__ import annotations

from typing import Any

from hermes_exp.errors import ConfigError

MAX_TASKS = 10_000_000  # tasks (rows x samples_per_prompt) one run plans: ~0.3 GB of keys, a day at 100/s
MAX_WORKERS = 1024  # concurrent sessions: each holds a sandbox; with executor=processes, a Python process


def check(settings: dict[str, Any]) -> None:
    """samples_per_prompt, num_workers and executor.n_jobs within their limits (their type is checked elsewhere)."""
    executor = settings.get("executor") if isinstance(settings.get("executor"), dict) else {}
    for key, value, limit, what, fix in (
            ("samples_per_prompt", settings.get("samples_per_prompt"), MAX_TASKS, "tasks one run plans",
             "lower samples_per_prompt (pass@k needs k samples, e.g. samples_per_prompt=10)"),
            ("num_workers", settings.get("num_workers"), MAX_WORKERS, "concurrent sessions",
             f"set num_workers=<n> with n <= {MAX_WORKERS}, e.g. num_workers=16"),
            ("executor.n_jobs", executor.get("n_jobs"), MAX_WORKERS, "concurrent sessions",
             f"set executor.n_jobs=<n> with n <= {MAX_WORKERS} (it defaults to num_workers)")):
        if isinstance(value, int) and not isinstance(value, bool) and value > limit:
            raise ConfigError(f"{key}={value:,} is over the limit of {limit:,} {what}", fix)


def too_many_tasks(samples: int, rows: int, dataset: Any) -> ConfigError:
    """What the scan says when the dataset's rows times samples_per_prompt pass MAX_TASKS."""
    return ConfigError(f"samples_per_prompt={samples:,} x {rows:,} rows of {dataset} (read so far) is over the "
                       f"limit of {MAX_TASKS:,} tasks one run plans",
                       "lower samples_per_prompt, select fewer rows (max_samples=<n>), or split the "
                       "dataset over several runs (run_name=...)")
