"""The parent's side of a verification: take the score (and workdir archive) out of a worker's result,
decide the sample's state from it, and store both beside the result in the ledger."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_exp.errors import VERIFIER
from hermes_exp.store.filters import Filter, first_reason
from hermes_exp.store.ledger import Ledger
from hermes_exp.store.scores import save_archive, save_output, save_score
from hermes_exp.worker.result import TaskResult


@dataclass
class Taken:
    score: dict[str, Any] | None = None
    archive: bytes | None = None
    note: str = ""


def take(result: TaskResult, redact: Any = None) -> Taken:
    """A worker result's verification, kept beside the result (its stored JSON holds only the agent's
    work). `redact` (a Redactor) scrubs secret values from the score's texts before they reach the ledger."""
    return Taken(redacted_score(result.score, redact), result.archive, result.archive_note or "")


def redacted_score(score: dict[str, Any] | None, redact: Any = None) -> dict[str, Any] | None:
    if score is not None and redact:
        score = {**score, **{k: redact(score[k]) for k in ("details", "error", "output") if score.get(k)}}
    return score


def judged(result: dict[str, Any], score: dict[str, Any] | None,
           filters: list[Filter]) -> tuple[str, str | None, str | None, str | None]:
    """(state, filter reason, error class, error) of a finished sample given its score. A failed
    verification is never done: it is error class `verifier`, verified again by the next invocation."""
    if score is not None and score.get("error"):
        return "error", None, VERIFIER, f"verification failed ({score.get('kind')}): {score['error']}"
    reason = first_reason(filters, {**result, "score": score})
    return ("filtered" if reason else "done"), reason, None, None


def save(ledger: Ledger, run_dir: Path, key: str, taken: Taken) -> None:
    if taken.score is not None:
        save_score(ledger, key, taken.score)
        save_output(run_dir, key, taken.score)
    if taken.archive:
        save_archive(ledger, run_dir, key, taken.archive)
