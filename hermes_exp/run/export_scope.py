"""Which tasks an export covers: the invocation's own dataset selection and samples_per_prompt, brought
into the ledger (task count, selected keys) as a run's plan does, with nothing run. Without this an
export kept the last run's slice, and its counts described that run instead of the files it wrote."""

from __future__ import annotations

import functools
import logging
import tempfile
from pathlib import Path
from typing import Any

from hermes_exp.errors import ConfigError, DatasetError
from hermes_exp.run.checks import Checked
from hermes_exp.run.plan import plan_invocation
from hermes_exp.dataset.selection import scan_selected
from hermes_exp.store.ledger import Ledger
from hermes_exp.verify.rows import row_checker

log = logging.getLogger(__name__)


def rescope(ledger: Ledger, settings: dict[str, Any], checked: Checked) -> tuple[int, bool] | None:
    """Scan the dataset with this invocation's selection; return (tasks of the ledger outside it, whether
    the selection narrows the dataset), or None when the dataset cannot be read any more (moved or
    deleted after the run): the export then covers the last selection the ledger recorded, as it says."""
    prepared = checked.prepared
    try:
        dataset, selection, cache = prepared.dataset, prepared.selection, prepared.cache
    except (ConfigError, DatasetError) as exc:
        path = (settings.get("dataset") or {}).get("path")
        if path and not Path(str(path)).exists():
            log.warning("the dataset %s cannot be read (%s): the export covers the tasks of the last "
                        "dataset selection the ledger recorded", path, exc.args[0] if exc.args else exc)
            return None
        raise
    check = cache.watching(row_checker(prepared.verified))
    with tempfile.TemporaryFile(dir=prepared.run_dir, prefix=".dataset-") as spool:
        scan = functools.partial(scan_selected, dataset, selection, prepared.identity,
                                 bool(settings["dataset"].get("skip_invalid")), samples=checked.samples,
                                 extra_check=check, spool=spool)
        found = cache.load(keys=False) or scan()
        _, plan = plan_invocation(ledger, cache, found, scan, selection, checked.intent, None)
    return plan.gone, bool(selection.narrows or selection.max_rows)
