"""The ledger's `done`/`filtered` verdicts follow the filters of the invocation that reads them.

A task's state is a cache of one filter verdict. The ledger records (meta `filters_key`) which filters,
verifier and scores made the verdicts; any invocation whose own differ re-judges every finished task
first (a pure function of the ledger: no model call), so no invocation's outputs or counts use another
invocation's filters."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hermes_exp.store import filters as filters_mod
from hermes_exp.store.ledger import Ledger
from hermes_exp.store.score_book import ScoreBook

FILTERS_KEY = "filters_key"


def filters_key(ledger: Ledger, settings: dict[str, Any]) -> str:
    """What the verdicts depend on: the filter rules, the verifier config, and the scores held."""
    scores = ledger.db.execute("SELECT COUNT(*), MAX(scored_at) FROM scores").fetchone()
    text = json.dumps([(settings.get("filters") or {}).get("rules") or [], settings.get("verifier"), list(scores)],
                      sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def reapply(ledger: Ledger, settings: dict[str, Any], always: bool = False) -> int:
    """Re-judge every finished task with `settings`' filters unless the ledger says its verdicts were
    made by the same ones (`always`: anyway); return how many tasks changed state."""
    key = filters_key(ledger, settings)
    if not always and ledger.meta(FILTERS_KEY) == key:
        return 0
    filters = filters_mod.build(settings.get("filters"))
    book = ScoreBook(ledger, settings)
    changed = 0
    for row in ledger.rows(("done", "filtered")):
        result = json.loads(row["result"] or "{}")
        score = book.get(row["key"], result.get("row") or {})
        reason = filters_mod.first_reason(filters, {**result, "score": score})
        state = "filtered" if reason else "done"
        if (state, reason) != (row["state"], row["reason"]):
            ledger.set_state(row["key"], state, reason)
            changed += 1
    ledger.set_meta({FILTERS_KEY: key})
    return changed


def settled(ledger: Ledger, settings: dict[str, Any]) -> None:
    """Every verdict was made by `settings`' filters (the tasks this invocation judged, after `reapply`
    judged the others): recorded, with the scores they added, so the next invocation reads no result."""
    ledger.set_meta({FILTERS_KEY: filters_key(ledger, settings)})


def describe_filters(settings: dict[str, Any]) -> list[str]:
    """The filter rules by class name (`NoReasoning`, `Verified`), in order."""
    rules = (settings.get("filters") or {}).get("rules") or []
    return [str(r.get("_target_", "?")).rsplit(".", 1)[-1] for r in rules if isinstance(r, dict)]


def describe(settings: dict[str, Any]) -> str:
    """`filters [NoReasoning, Verified], selection best_of_n`: what produced the outputs."""
    names = ", ".join(describe_filters(settings)) or "none"
    return f"filters [{names}], selection {settings.get('selection') or 'all'}"
