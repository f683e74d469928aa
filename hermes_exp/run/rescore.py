"""Verification without the agent: re-verify samples whose verification failed (every invocation does),
and `action=score`, which applies the current verifier to every finished sample (or only the suspect ones). `answer`, `checks` and
`judge` need only the ledger; `command` restores the task's workdir archive into a fresh sandbox."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from hermes_exp.worker import task as worker
from hermes_exp.errors import VERIFIER
from hermes_exp.store.filters import Filter
from hermes_exp.store.ledger import Ledger
from hermes_exp.store.scores import save_output, save_score, set_outcome
from hermes_exp.settings.redact import Redactor
from hermes_exp.store.score_record import judged, redacted_score
from hermes_exp.worker.result import Reverified

def items(rows: Iterable[dict[str, Any]], run_dir: Path) -> Iterator[dict[str, Any]]:
    """What a worker needs to verify a finished sample again: its row, raw result and archive bytes."""
    for row in rows:
        if not row.get("result"):
            continue
        result = json.loads(row["result"])
        if result.get("state") != "finished":
            continue  # the agent never finished: nothing to verify
        archive = run_dir / row["archive"] if row.get("archive") else None
        yield {"key": row["key"], "index": row["prompt_index"], "sample": row.get("sample") or 0,
               "row": result.get("row") or {}, "result": result,
               "archive": archive.read_bytes() if archive is not None and archive.is_file() else None}


def finished_keys(ledger: Ledger) -> list[str]:
    """Every sample whose agent finished: kept, filtered, or failed only in its verification."""
    return [k for k, s, c in ledger.db.execute("SELECT key, state, error_class FROM tasks WHERE state IN "
                                               "('done', 'filtered', 'error') ORDER BY prompt_index, key")
            if s != "error" or c == VERIFIER]


def rows_of(ledger: Ledger, keys: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The ledger rows of these keys, read one by one (the caller writes to the ledger meanwhile)."""
    for key in keys:
        cursor = ledger.db.execute("SELECT * FROM tasks WHERE key = ?", [key])
        names = [d[0] for d in cursor.description]
        for values in cursor:
            yield dict(zip(names, values))


def unscored(ledger: Ledger, keys: Iterable[str], book: Any) -> Iterator[str]:
    """The keys without a usable score under the verifier the current config gives their row."""
    for row in rows_of(ledger, keys):
        score = book.get(row["key"], (json.loads(row["result"] or "{}")).get("row") or {})
        if score is not None and (score.get("missing") or score.get("error")):
            yield row["key"]


def suspect(ledger: Ledger, keys: Iterable[str], book: Any) -> Iterator[str]:
    """The keys whose score under the verifier the current config gives their row is verifier_suspect."""
    for row in rows_of(ledger, keys):
        score = book.get(row["key"], (json.loads(row["result"] or "{}")).get("row") or {})
        if score is not None and score.get("suspect"):
            yield row["key"]


def apply(ledger: Ledger, out: Reverified, filters: list[Filter], batch_size: int) -> str:
    """Store one re-verification and the sample's new state; return that state."""
    score = out.score
    if score is not None:
        save_score(ledger, out.key, score)
        save_output(ledger.path.parent, out.key, score)
    if out.spent_usd:
        ledger.add_spend(out.key, float(out.spent_usd))
    state, reason, error_class, error = judged(out.result, score, filters)
    set_outcome(ledger, out.key, state, reason, error_class, error, batch_size)
    return state


def reverify(executor: Any, settings: dict[str, Any], ledger: Ledger, rows: Iterable[dict[str, Any]],
             filters: list[Filter]) -> Counter[str]:
    """Verify these samples again through the executor (no agent, no model call but a judge's);
    return how many ended in each state."""
    counts = Tally()
    run_dir = ledger.path.parent
    redact = Redactor.from_env(settings)
    for out in executor.map_unordered(worker.verify_task, settings, items(rows, run_dir)):
        if out.skipped:  # it could not run: the sample keeps its scores and its state
            counts.why[redact(out.skipped)] += 1
            continue
        out.score = redacted_score(out.score, redact)
        counts[apply(ledger, out, filters, int(settings["batch_size"]))] += 1
    return counts


class Tally(Counter):
    """How many re-verified samples ended in each state; `why`: how many could not be verified again, by reason."""

    def __init__(self) -> None:
        super().__init__()
        self.why: Counter[str] = Counter()


def report(counts: Counter[str], what: str) -> None:
    if counts:
        print(f"{what}: {sum(counts.values())} sample(s) verified without the agent "
              f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})", file=sys.stderr)
    for reason, n in sorted(getattr(counts, "why", {}).items()):
        print(f"{what}: {n} sample(s) could not be verified again and keep their scores: {reason}", file=sys.stderr)
