"""Hydra callback (`hydra.callbacks.job_dir`): a job directory that holds nothing but Hydra's own log file
holds no run, so it is removed when the job ends. Hydra makes `outputs/<run_name>/` and opens `cli.log`
there before the job starts; a refused invocation (a typo, a missing dataset) would leave both behind."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback  # Hydra's documented base: every other hook a no-op


class DropEmpty(Callback):
    def on_job_end(self, config: Any, job_return: Any = None, **_: Any) -> None:
        drop_if_empty(Path(config.hydra.runtime.output_dir))


def drop_if_empty(job_dir: Path) -> bool:
    """Remove `job_dir` when it holds only the log files of this process's handlers; True if removed."""
    root = logging.getLogger()
    logs = {Path(h.baseFilename): h for h in root.handlers if isinstance(h, logging.FileHandler)}
    try:
        entries = list(job_dir.iterdir())
    except OSError:
        return False
    if any(entry not in logs for entry in entries):
        return False
    for entry in entries:
        handler = logs[entry]
        root.removeHandler(handler)  # nothing more goes to a file that is about to be removed
        handler.close()
        entry.unlink(missing_ok=True)
    try:
        job_dir.rmdir()
    except OSError:  # another invocation wrote into it meanwhile: it is its directory now
        return False
    return True
