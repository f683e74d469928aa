"""Reading scores back at export time: for each finished sample, its score under the verifier that the
current config gives its row (scores under other verifiers stay in the ledger, unused)."""

from __future__ import annotations

import json
from typing import Any

from hermes_exp.store.ledger import Ledger
from hermes_exp.verify import registry
from hermes_exp.verify.scoring import Scorer


class ScoreBook:
    """`get(task_row, result)` -> {"reward", "passed", "error", ...} or None (not verified / no score yet).
    One primary-key lookup per sample; the verifier identity is cached per distinct row override."""

    def __init__(self, ledger: Ledger, settings: dict[str, Any]) -> None:
        self.ledger = ledger
        self.scorer = Scorer(settings)
        self._vids: dict[str, str | None] = {}

    def vid(self, row: dict[str, Any]) -> str | None:
        """The identity of the verifier this row gets now (None: not verified)."""
        return self.spec_vid(spec(row))

    def spec_vid(self, spec: str) -> str | None:
        """`vid` of a row given by its `spec` (what of a row chooses its verifier)."""
        if spec not in self._vids:
            try:
                cfg = registry.effective(self.scorer.options, self.scorer.chosen, json.loads(spec))
            except Exception:
                cfg = None
            self._vids[spec] = registry.identity(cfg) if cfg else None
        return self._vids[spec]

    def get(self, key: str, row: dict[str, Any]) -> dict[str, Any] | None:
        return self.get_spec(key, spec(row))

    def get_spec(self, key: str, spec: str) -> dict[str, Any] | None:
        vid = self.spec_vid(spec)
        if vid is None:
            return None
        found = self.ledger.db.execute(
            "SELECT reward, passed, error, cost_usd, api_calls, suspect FROM scores WHERE key = ? AND verifier = ?",
            [key, vid]).fetchone()
        if found is None:
            return {"verifier": vid, "reward": None, "passed": None, "error": None, "missing": True}
        reward, passed, error, cost, calls, suspect = found
        return {"verifier": vid, "reward": reward, "passed": None if passed is None else bool(passed),
                "error": error, "cost_usd": cost or 0.0, "api_calls": calls or 0, "suspect": suspect,
                "missing": False}


def spec(row: dict[str, Any]) -> str:
    """What of a task row chooses its verifier (`verifier` and the row options), as JSON text."""
    return json.dumps({k: row[k] for k in ("verifier", *registry.ROW_OPTION_NAMES) if k in row},
                      sort_keys=True, default=str)
