"""Which tasks an invocation runs: the dataset's keys minus what the ledger says is settled,
according to the user's resume intent (continue, retry error classes, redo filtered, redo all)."""

from __future__ import annotations

from typing import Any

from hermes_exp.errors import ConfigError

ERROR_CLASSES = ("provider", "sandbox", "model", "internal", "budget")
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


def pending(indexed: list[tuple[int, str]], states: dict[str, tuple[str, str | None]],
            wanted: dict[str, Any]) -> dict[int, str]:
    """line index -> key of every task to run now. Tasks never seen, and `running` rows left by
    a crash, always run; `done` never unless redo_all; `error` when its class is to be retried."""
    out: dict[int, str] = {}
    for index, key in indexed:
        state, error_class = states.get(key, ("new", None))
        if wanted["redo_all"] or state in ("new", "running"):
            out[index] = key
        elif state == "filtered" and wanted["redo_filtered"]:
            out[index] = key
        elif state == "error" and error_class in wanted["retry"]:
            out[index] = key
    return out
