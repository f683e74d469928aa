"""Which tasks an invocation runs: the dataset's keys minus what the ledger says is settled,
according to the user's resume intent (continue, retry error classes, redo filtered, redo all)."""

from __future__ import annotations

from typing import Any

from hermes_exp.dataset import Slot
from hermes_exp.errors import ConfigError

VERIFIER = "verifier"  # a failed verification: re-verified by every invocation, the agent never re-run
ERROR_CLASSES = ("provider", "sandbox", "model", "internal", "budget", VERIFIER)
DEFAULT_RETRY = ("provider", "sandbox")


def intent(settings: dict[str, Any]) -> dict[str, Any]:
    """The `resume` config, validated."""
    resume = dict(settings.get("resume") or {})
    retry = resume.get("retry_errors")
    retry = list(DEFAULT_RETRY if retry is None else retry)
    bad = [c for c in retry if c not in ERROR_CLASSES]
    if bad:
        raise ConfigError(f"resume.retry_errors has unknown error class(es) {bad}",
                          f"choose from: {', '.join(ERROR_CLASSES)}, e.g. resume.retry_errors=[provider,model]")
    return {"retry": set(retry), "redo_filtered": bool(resume.get("redo_filtered")),
            "redo_all": bool(resume.get("redo_all"))}


def samples_per_prompt(settings: dict[str, Any]) -> int:
    """`samples_per_prompt`, validated: raising it later runs only the new samples; lowering it hides
    the extra ones from exports (they stay in the ledger)."""
    value = settings.get("samples_per_prompt", 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"samples_per_prompt must be a positive integer, got {value!r}",
                          "set samples_per_prompt=<n> with n >= 1 (attempts per prompt, for pass@k)")
    return value


def pending(indexed: list[Slot], states: dict[str, tuple[str, str | None]],
            wanted: dict[str, Any]) -> list[Slot]:
    """Every task to run now, in dataset order. Tasks never seen, and `running` rows left by a crash,
    always run; `done` never unless redo_all; `error` when its class is to be retried. A failed
    verification (class `verifier`) never re-runs the agent: only its verification is re-run."""
    out: list[Slot] = []
    for slot in indexed:
        state, error_class = states.get(slot.key, ("new", None))
        if wanted["redo_all"] or state in ("new", "running"):
            out.append(slot)
        elif state == "filtered" and wanted["redo_filtered"]:
            out.append(slot)
        elif state == "error" and error_class in wanted["retry"] and error_class != VERIFIER:
            out.append(slot)
    return out


def to_reverify(indexed: list[Slot], states: dict[str, tuple[str, str | None]]) -> list[Slot]:
    """Tasks whose agent finished but whose verification failed: verified again, agent untouched."""
    return [s for s in indexed if states.get(s.key) == ("error", VERIFIER)]


def outside(indexed: list[Slot], states: dict[str, tuple[str, str | None]]) -> int:
    """How many of the ledger's tasks the dataset no longer has (a row edited or removed, a lower
    samples_per_prompt): their results stay in the ledger, out of the exports, statistics and exit code."""
    return len(states.keys() - {slot.key for slot in indexed})
