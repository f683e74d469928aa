"""What a run derives from its settings before it claims the run directory (the identity, the dataset, the
selection, the pilot size, the verifier options, the scan cache), each computed once, and whether the
invocation is a settled no-op: the ledger's last plan found nothing to run from this very cached scan and
selection, and no task row was written since (plan.settled_verdict's rule).

That look is taken before the run directory is claimed, without its lock, and writes nothing: it only lets
a settled invocation skip start-up checks of what only a run with work uses (building every toolset's
tools). It never decides what runs: the plan made under the lock does, and a run that finds work there
after all (another invocation wrote in between) makes those checks then, before any task starts. A part
that fails here is not kept: the run computes it again, and meets the same error, where it always did."""

from __future__ import annotations

import sqlite3
from functools import cached_property
from pathlib import Path
from typing import Any

from hermes_exp.run import pilot
from hermes_exp.dataset.tasks import open_dataset
from hermes_exp.dataset.readers import Source
from hermes_exp.dataset.readers.harbor import check_sandbox
from hermes_exp.run.plan import SETTLED, settled_verdict
from hermes_exp.run.scan_cache import ScanCache, cache_key
from hermes_exp.dataset.selection import Selection, from_settings
from hermes_exp.settings.resolved import identity_hash
from hermes_exp.store.ledger import derived_value
from hermes_exp.verify.rows import with_verifiers


class Prepared:
    def __init__(self, settings: dict[str, Any], run_dir: Path) -> None:
        self.settings, self.run_dir = settings, run_dir

    @cached_property
    def identity(self) -> str:
        return identity_hash(self.settings)

    @cached_property
    def dataset(self) -> Source:
        dataset = open_dataset(self.settings["dataset"])
        check_sandbox(dataset, self.settings)  # a Harbor dataset needs sandbox=docker: said before any work
        return dataset

    @cached_property
    def selection(self) -> Selection:
        return from_settings(self.settings)

    @cached_property
    def pilot(self) -> int | None:
        return pilot.pilot_size(self.settings)

    @cached_property
    def verified(self) -> dict[str, Any]:
        """The settings with every verifier option loaded (what the scan's row checks and keys see)."""
        return with_verifiers(self.settings)

    @cached_property
    def cache(self) -> ScanCache:
        return ScanCache(self.run_dir, self.dataset, cache_key(self.verified, self.selection))

    def settled(self) -> bool:
        """Whether this invocation will find nothing to run, as far as can be told now (see the module's
        docstring); False on any doubt, an error included. A run directory without this experiment's
        settled verdict is told so from its ledger alone, before the dataset is opened."""
        try:
            if self.pilot:
                return False
            kept = _meta_rows(self.run_dir / "ledger.db", ("identity", "selection", f"derived:{SETTLED}"))
            if kept.meta("identity") != self.identity or kept.derived(SETTLED) is None or self.cache.key is None:
                return False
            return settled_verdict(kept, self.cache.identity()) is not None
        except Exception:  # noqa: BLE001 - only a shortcut: the run meets the error where it always did
            return False


class _Meta:
    """Meta rows of a ledger, read as Ledger.meta / Ledger.derived read them."""

    def __init__(self, rows: dict[str, str]) -> None:
        self.rows = rows

    def meta(self, key: str) -> str | None:
        return self.rows.get(key)

    def derived(self, name: str) -> Any:
        return derived_value(self.meta(f"derived:{name}"))


def _meta_rows(path: Path, keys: tuple[str, ...]) -> _Meta:
    """These meta rows of the ledger at `path` (none when there is no ledger), read on a connection that
    never creates the file (mode=rw) and runs nothing but one SELECT."""
    if not path.is_file() or path.stat().st_size == 0:
        return _Meta({})
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True)
    try:
        marks = ", ".join("?" * len(keys))
        return _Meta(dict(conn.execute(f"SELECT key, value FROM meta WHERE key IN ({marks})", keys).fetchall()))
    finally:
        conn.close()
