"""The sweep summary: one row per job of a folder of runs (the overrides that tell the jobs apart,
task counts with the tasks preflight=oracle found broken, kept %, pass rate and pass@k with intervals
when a verifier ran, its verifier_suspect samples and the pass rate without them, tool success, turns,
model calls, tokens, cost, wall time), as a terminal table, summary.json and summary.csv."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_exp.store.atomic import atomic_writer
from hermes_exp.store.metrics import wilson

COLUMNS = ["job", "overrides", "model", "tasks", "done", "filtered", "failed", "broken", "pending", "kept_pct",
           "pass_rate", "pass_rate_ci95", "suspect", "pass_rate_without_suspect", "mean_reward", "mean_reward_ci95",
           "pass_at_k", "tool_success_pct", "mean_turns", "mean_model_calls", "tokens", "cost_usd", "wall_seconds"]


def find_jobs(folder: Path) -> list[Path]:
    """Run directories in `folder` (itself if it is one) or at any depth below it (a sweep inside
    outputs/), each with its statistics.json."""
    if (folder / "statistics.json").is_file():
        return [folder]
    return sorted(p.parent for p in folder.rglob("statistics.json") if (p.parent / "ledger.db").is_file())


def unexported(folder: Path) -> list[Path]:
    """Run directories below `folder` with a ledger but no statistics.json yet (never exported)."""
    return sorted(p.parent for p in folder.rglob("ledger.db") if not (p.parent / "statistics.json").is_file())


def _name(run_dir: Path, folder: Path) -> str:
    """The run's path below the summarised folder (its own name when it is the folder)."""
    try:
        return run_dir.relative_to(folder).as_posix() if run_dir != folder else run_dir.name
    except ValueError:
        return run_dir.name


# Not a setting that tells runs apart: the run's own name already names its row.
_NOT_SETTINGS = ("run_name", "hydra.")


def _overrides(run_dir: Path) -> dict[str, str]:
    path = run_dir / ".hydra" / "overrides.yaml"
    if not path.is_file():
        return {}
    from omegaconf import OmegaConf

    items = OmegaConf.to_container(OmegaConf.load(path)) or []
    pairs = dict(str(item).lstrip("+~").split("=", 1) for item in items if "=" in str(item))
    return {k: v for k, v in pairs.items() if not k.startswith(_NOT_SETTINGS)}


_ABSENT = object()


def _setting(run_dir: Path, key: str, typed: str | None) -> str | None:
    """The value `key` had in the run, from its saved config (where a run that did not override it has
    its default): a config group's chosen option (`model=mock`), else the value; else what was typed."""
    from omegaconf import OmegaConf

    hydra, config = run_dir / ".hydra" / "hydra.yaml", run_dir / ".hydra" / "config.yaml"
    try:
        if hydra.is_file():
            choice = OmegaConf.select(OmegaConf.load(hydra), "hydra.runtime.choices", default=None) or {}
            if key in choice:
                return _text(choice[key])
        if not config.is_file():
            return typed
        value = OmegaConf.select(OmegaConf.load(config), key, default=_ABSENT, throw_on_resolution_failure=False)
    except Exception:  # a saved config that no longer loads: what was typed is all there is
        return typed
    if value is _ABSENT or (value is None and typed is not None) or (OmegaConf.is_config(value) and typed):
        return typed
    return _text(OmegaConf.to_container(value) if OmegaConf.is_config(value) else value)


def _text(value: Any) -> str:
    """A config value as a user types it on the command line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return value if isinstance(value, str) else json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def _turns(run_dir: Path) -> float | None:
    """Mean assistant turns per finished trajectory of the run's current selection (from its ledger)."""
    conn = sqlite3.connect(f"{(run_dir / 'ledger.db').resolve().as_uri()}?mode=ro", uri=True)
    try:
        selected = conn.execute("SELECT value FROM meta WHERE key = 'selection'").fetchone()
        where = "state IN ('done', 'filtered')" + (" AND key IN (SELECT key FROM selection)"
                                                    if selected and selected[0] else "")
        row = conn.execute("SELECT AVG((SELECT COUNT(*) FROM json_each(result, '$.messages') m "
                           "WHERE json_extract(m.value, '$.role') = 'assistant')) FROM tasks "
                           f"WHERE {where}").fetchone()
    finally:
        conn.close()
    return None if row[0] is None else round(row[0], 3)


def job_row(run_dir: Path, folder: Path | None = None) -> dict[str, Any]:
    stats = json.loads((run_dir / "statistics.json").read_text(encoding="utf-8"))
    finished = stats["kept"] + stats["filtered"]
    tools = [t for t in (stats.get("tool_statistics") or {}).values() if t.get("count")]
    calls, ok = sum(t["count"] for t in tools), sum(t["success"] for t in tools)
    verified = stats.get("verification") or {}
    scored, passed = verified.get("scored") or 0, verified.get("passed") or 0
    tokens = stats.get("tokens") or {}
    return {
        "job": _name(run_dir, folder or run_dir.parent), "path": str(run_dir), "overrides": _overrides(run_dir),
        "model": stats.get("model"),
        "tasks": stats["total_prompts"], "done": stats["kept"], "filtered": stats["filtered"],
        "failed": stats["failed"], "broken": stats.get("broken") or 0, "pending": stats["pending"],
        "kept_pct": round(100 * stats["kept"] / stats["total_prompts"], 2) if stats["total_prompts"] else None,
        "pass_rate": verified.get("pass_rate"), "pass_rate_ci95": wilson(passed, scored) if scored else None,
        "suspect": verified.get("suspect"), "pass_rate_without_suspect": verified.get("pass_rate_without_suspect"),
        "mean_reward": verified.get("mean_reward"), "mean_reward_ci95": verified.get("mean_reward_ci95"),
        "pass_at_k": verified.get("pass_at_k") or None,
        "tool_success_pct": round(100 * ok / calls, 2) if calls else None,
        "mean_turns": _turns(run_dir),
        "mean_model_calls": round(stats["api_calls"] / (finished + stats["failed"]), 3)
        if finished + stats["failed"] else None,
        "tokens": (tokens.get("prompt_tokens") or 0) + (tokens.get("completion_tokens") or 0),
        "cost_usd": stats.get("spent_usd", stats.get("cost_usd")), "wall_seconds": stats.get("duration_seconds"),
    }


def summarize(jobs: list[Path], folder: Path | None = None) -> list[dict[str, Any]]:
    """One row per job, sorted by pass rate (else kept %), best first; `overrides` keeps only the
    settings whose values differ between the jobs, each with the value the job ran with."""
    rows = [job_row(j, folder) for j in jobs]
    keys = list(dict.fromkeys(k for r in rows for k in r["overrides"]))
    for row in rows:
        row["overrides"] = {k: _setting(Path(row["path"]), k, row["overrides"].get(k)) for k in keys}
    differ = [k for k in keys if len({r["overrides"][k] for r in rows}) > 1] if len(rows) > 1 else keys
    for row in rows:
        row["overrides"] = {k: row["overrides"][k] for k in differ}
    def rank(r: dict[str, Any]) -> tuple:  # noqa: E306
        return (r["pass_rate"] is None, -(r["pass_rate"] or 0), -(r["kept_pct"] or 0), r["job"])
    return sorted(rows, key=rank)


def _flat(rows: list[dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    ks = sorted({k for r in rows for k in (r["pass_at_k"] or {})}, key=int)
    names = ([c for c in COLUMNS if c not in ("pass_rate_ci95", "mean_reward_ci95", "pass_at_k")]
             + ["pass_rate_lo", "pass_rate_hi", "mean_reward_lo", "mean_reward_hi"] + [f"pass@{k}" for k in ks])
    flat = []
    for r in rows:
        item = {c: r[c] for c in names if c in r}
        item["overrides"] = " ".join(f"{k}={v}" for k, v in r["overrides"].items())
        item["pass_rate_lo"], item["pass_rate_hi"] = r["pass_rate_ci95"] or (None, None)
        item["mean_reward_lo"], item["mean_reward_hi"] = r["mean_reward_ci95"] or (None, None)
        item.update({f"pass@{k}": (r["pass_at_k"] or {}).get(k) for k in ks})
        flat.append(item)
    return names, flat


def write(folder: Path, rows: list[dict[str, Any]], not_run: dict[str, int] | None = None) -> tuple[Path, Path]:
    """summary.json and summary.csv in `folder`, written atomically. `not_run`: jobs of this sweep that
    ended before they had statistics (job -> exit code), in summary.json only."""
    content: dict[str, Any] = {"folder": str(folder), "jobs": rows}
    if not_run:
        content["not_run"] = [{"job": job, "exit_code": code} for job, code in sorted(not_run.items())]
    with atomic_writer(folder / "summary.json") as out:
        out.write(json.dumps(content, indent=2) + "\n")
    names, flat = _flat(rows)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    writer.writerows(flat)
    with atomic_writer(folder / "summary.csv") as out:
        out.write(buffer.getvalue())
    return folder / "summary.json", folder / "summary.csv"


def _cell(value: Any, pct: bool = False) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return f"[{_cell(value[0], pct)}, {_cell(value[1], pct)}]"
    if isinstance(value, float):
        return f"{100 * value:.1f}%" if pct else f"{value:g}"
    return str(value)


def label_of(row: dict[str, Any], short: dict[str, str] | None = None) -> str:
    """The run (its path in the folder), then the settings that set it apart and its path does not say
    (each key by `short`'s name for it)."""
    extra = [f"{(short or {}).get(k, k)}={v}" for k, v in row["overrides"].items() if f"{k}={v}" not in row["job"]]
    return " ".join([row["job"], *extra])


def short_keys(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Each setting by the last part of its key (`no_reasoning_rate`) when no two keys share it."""
    keys = list(dict.fromkeys(k for r in rows for k in r["overrides"]))
    tails = {k: k.rsplit(".", 1)[-1] for k in keys}
    return tails if len(set(tails.values())) == len(keys) else {k: k for k in keys}


def _pct(value: float | None) -> str:
    return _cell(value) + ("%" if value is not None else "")


def _passed(r: dict[str, Any]) -> str:
    return "-" if r["pass_rate"] is None else f"{_cell(r['pass_rate'], True)} {_cell(r['pass_rate_ci95'], True)}"


def _suspect(r: dict[str, Any]) -> str:
    """verifier_suspect samples, and the pass rate without them."""
    return "-" if r["suspect"] is None else f"{r['suspect']} ({_cell(r['pass_rate_without_suspect'], True)})"


def _columns(rows: list[dict[str, Any]]) -> list[tuple[str, Callable[[dict[str, Any]], str]]]:
    """The table's columns after the job's, each head with its cell; broken and suspect only when a job has some."""
    broken = [("broken", lambda r: str(r["broken"]))] if any(r["broken"] for r in rows) else []
    suspect = [("suspect (pass w/o)", _suspect)] if any(r["suspect"] for r in rows) else []
    return [("done", lambda r: str(r["done"])), ("filt", lambda r: str(r["filtered"])),
            ("fail", lambda r: str(r["failed"])), *broken, ("pend", lambda r: str(r["pending"])),
            ("kept", lambda r: _pct(r["kept_pct"])), ("pass (95% CI)", _passed), *suspect,
            ("pass@k", lambda r: " ".join(f"@{k} {v:.2f}" for k, v in (r["pass_at_k"] or {}).items()) or "-"),
            ("tools ok", lambda r: _pct(r["tool_success_pct"])), ("turns", lambda r: _cell(r["mean_turns"])),
            ("calls", lambda r: _cell(r["mean_model_calls"])), ("tokens", lambda r: str(r["tokens"])),
            ("cost $", lambda r: f"{r['cost_usd']:.4f}" if r["cost_usd"] is not None else "-"),
            ("wall s", lambda r: _cell(r["wall_seconds"]))]


def table(rows: list[dict[str, Any]], title: str) -> str:
    """The summary as a table for the terminal (rich, rendered to text)."""
    from rich.console import Console
    from rich.table import Table

    grid = Table(title=title, title_justify="left")
    columns = _columns(rows)
    grid.add_column("job", justify="left", overflow="fold", min_width=32)
    for head, _ in columns:
        grid.add_column(head, justify="right", overflow="fold")
    short = short_keys(rows)
    for r in rows:
        grid.add_row(label_of(r, short), *(cell(r) for _, cell in columns))
    console = Console(file=io.StringIO(), width=200, color_system=None)  # a wide table is never cut off
    console.print(grid, crop=False)
    return console.file.getvalue()


def summary(folder: Path, jobs: list[Path] | None = None, not_run: dict[str, int] | None = None) -> str:
    """Summarise `jobs` (default: every run in `folder`), write the files, return the table; jobs that
    did not run (job -> exit code) are named under it, so a table of fewer jobs than swept says why."""
    rows = summarize(jobs if jobs is not None else find_jobs(folder), folder)
    json_path, csv_path = write(folder, rows, not_run)
    missing = "".join(f"  did not run: {job} (exit {code}; its error is printed above)\n"
                      for job, code in sorted((not_run or {}).items()))
    if jobs is None:  # on demand: say which runs of the folder are not in the table, and why
        missing += "".join(f"  skipped {_name(run, folder)}: a ledger.db without statistics.json (not finished, "
                           "or never exported: run it again to write it)\n" for run in unexported(folder))
    return table(rows, f"{folder} ({len(rows)} job{'s' if len(rows) != 1 else ''})") + missing + \
        f"  summary: {json_path}\n           {csv_path}\n"
