"""Up-front checks of the dataset fields verification uses, so a bad row is reported with its line
number before any model call (not discovered by a worker hours later), and the run's verifier
options loaded once for the workers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_exp.errors import ConfigError
from hermes_exp.verify import registry
from hermes_exp.verify.checks import check_spec
from hermes_exp.verify.scoring import Scorer

# Row fields this package reads: what each must be.
FILE_FIELDS = ("files", "tests", "solution_files")
COMMAND_FIELDS = ("setup", "verify", "solution")
ROW_FIELDS = ("verifier", "expected", "checks", *FILE_FIELDS, *COMMAND_FIELDS)
FIX = ("give the row what its verifier needs, name another one on the row (\"verifier\": \"none\"), "
       "or skip such rows with dataset.skip_invalid=true")


def with_verifiers(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings with every conf/verifier option loaded (for per-row verifiers) under `invocation`."""
    from hermes_exp.settings.paths import config_dir

    invocation = dict(settings.get("invocation") or {})
    invocation["verifiers"] = registry.load_options(settings, config_dir())
    return {**settings, "invocation": invocation}


def check_verifier(scorer: Scorer, settings: dict[str, Any]) -> None:
    """Build the run's own verifier now (a bad option is a ConfigError before any work); a judge's
    API key must be set."""
    cfg = registry.effective(scorer.options, scorer.chosen, {})
    if cfg is None:
        return
    registry.build(cfg, scorer.context)
    if cfg.get("kind") == "judge":
        from hermes_exp.settings.resolved import api_key

        api_key({"provider": cfg.get("provider") or {}, "model": cfg.get("model") or {}})


def _field_problem(row: dict[str, Any], base_dir: str) -> str | None:
    for field in FILE_FIELDS:
        value = row.get(field)
        if value is not None and not isinstance(value, (str, dict)):
            return f"\"{field}\" must be a folder path or a map {{path: content}}, got {type(value).__name__}"
        if isinstance(value, dict) and not all(isinstance(v, str) for v in value.values()):
            return f"\"{field}\": every file's content must be a string"
        if isinstance(value, str) and not (Path(base_dir) / Path(value).expanduser()).is_dir():
            return f"\"{field}\" names the folder {value!r}, which does not exist (relative paths start at the dataset's folder)"
    for field in COMMAND_FIELDS:
        if field in row and not isinstance(row[field], str):
            return f"\"{field}\" must be a shell command (a string), got {type(row[field]).__name__}"
    if "checks" in row:
        return check_spec(row["checks"])
    return None


def row_checker(settings: dict[str, Any]) -> Callable[[dict[str, Any]], str | None]:
    scorer = Scorer(settings)
    check_verifier(scorer, settings)
    unverified = scorer.chosen == registry.NONE

    def check(row: dict[str, Any]) -> str | None:
        if unverified and not any(field in row for field in ROW_FIELDS):
            return None  # the common case costs one scan of a few names
        problem = _field_problem(row, scorer.context.base_dir)
        if problem:
            return problem
        try:
            plan = scorer.plan(row)
        except ConfigError as exc:
            return f"{exc.message} ({exc.hint})" if exc.hint else exc.message
        lacking = plan.verifier.row_problem(row) if plan is not None and hasattr(plan.verifier, "row_problem") else None
        return f"{lacking} ({FIX})" if lacking else None

    return check
