"""What the `hermes-exp` command does once every job has ended: each job (in whatever process a
launcher ran it) appends one status line, and the command then knows its exit code (the worst job's)
and, after a `-m` sweep, writes the sweep summary into the sweep directory."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

log = logging.getLogger(__name__)


def status_line(code: int) -> str:
    """`code<TAB>sweep dir<TAB>run dir` (the dirs are empty outside a Hydra job, the sweep dir for a
    single run)."""
    sweep_dir = run_dir = ""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hydra_cfg = HydraConfig.get()
        run_dir = str(Path(hydra_cfg.runtime.output_dir).resolve())
        if hydra_cfg.mode == RunMode.MULTIRUN:
            sweep_dir = str(Path(hydra_cfg.sweep.dir).resolve())
    except ValueError:  # not inside a Hydra job
        pass
    return f"{code}\t{sweep_dir}\t{run_dir}\n"


def finish(status_text: str, since: float = 0.0) -> int:
    """The command's exit code; prints (and writes) the summary of every sweep that ran, and the
    sweep's cost projection when its jobs ran as pilots (pilot=K) in this command (started at `since`)."""
    codes: list[int] = []
    sweeps: dict[str, list[Path]] = {}
    not_run: dict[str, dict[str, int]] = {}  # sweep dir -> job (its directory's name) -> exit code
    for line in status_text.splitlines():
        if not line.strip():
            continue
        code, sweep_dir, run_dir = (line.split("\t") + ["", ""])[:3]
        codes.append(int(code))
        if sweep_dir and run_dir and (Path(run_dir) / "statistics.json").is_file():
            sweeps.setdefault(sweep_dir, []).append(Path(run_dir))
        elif sweep_dir and run_dir:  # refused before it ran (a missing key, a bad value): listed, not lost
            not_run.setdefault(sweep_dir, {})[Path(run_dir).name] = int(code)
    for sweep_dir in sorted(set(sweeps) | set(not_run)):
        jobs = sorted(set(sweeps.get(sweep_dir, [])))
        _summarise(Path(sweep_dir), jobs, not_run.get(sweep_dir, {}))
        from hermes_exp.run.pilot import sweep_total

        total = sweep_total(jobs, since) if jobs else None
        if total:
            print(total, file=sys.stderr)
    return max(codes, default=0)


def _summarise(sweep_dir: Path, jobs: list[Path], not_run: dict[str, int]) -> None:
    from hermes_exp.report.summary import summary

    try:
        print("\n" + summary(sweep_dir, jobs, not_run), file=sys.stderr)
    except (OSError, ValueError, KeyError) as exc:  # a summary must never change what the jobs did
        log.warning("could not write the sweep summary of %s: %s", sweep_dir, exc)
