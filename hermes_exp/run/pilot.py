"""Know the cost before paying it: `pilot=K` runs K tasks spread evenly over the selected dataset and
projects the whole run (every task, every sample) from what they cost and how long they took; the
same command without `pilot` then runs the rest (the K are done, so they are not run again)."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hermes_exp.errors import BROKEN, ConfigError
from hermes_exp.store.atomic import atomic_writer

PILOT_FILE = "pilot.json"


def pilot_size(settings: dict[str, Any]) -> int | None:
    value = settings.get("pilot")
    if value is None or value is False:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"pilot={value!r} must be a positive number of tasks",
                          "e.g. pilot=20 runs 20 tasks spread over the dataset and projects the cost; null for none")
    return value


def spread(indexed: Sequence[tuple], k: int) -> list[tuple]:
    """K tasks spread evenly over the dataset's rows (one per chosen row: its first sample)."""
    first: dict[int, tuple] = {}
    for entry in indexed:
        first.setdefault(entry[0], entry)
    rows = list(first.values())
    if k >= len(rows):
        return rows
    return [rows[(i * len(rows)) // k] for i in range(k)]


def restrict(todo: Any, keys: set[str]) -> Any:
    """The pending tasks that are pilot tasks (`todo` maps row index -> key, or lists entries)."""
    if isinstance(todo, dict):
        return {i: k for i, k in todo.items() if k in keys}
    return [entry for entry in todo if entry[1] in keys]


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))] if ordered else 0.0


def projection(ledger: Any, keys: list[str], total_tasks: int, workers: int, checked: bool = False) -> dict[str, Any]:
    """From the pilot tasks' ledger rows (every attempt's spend, wall time): the whole run's cost
    (mean and p90 per task) and duration at `workers` sessions at once. `checked`: preflight=oracle
    checked their environments; a broken task (never sent to the model) is left out of the projection."""
    marks = ",".join("?" * len(keys))
    rows = ledger.db.execute(f"SELECT state, spent_usd, started_at, finished_at, error_class FROM tasks "
                             f"WHERE key IN ({marks})", keys).fetchall()
    broken = sum(r[4] == BROKEN for r in rows)
    settled = [r for r in rows if r[0] in ("done", "filtered", "error") and r[4] != BROKEN]
    costs = [float(r[1] or 0.0) for r in settled]
    seconds = [max(0.0, (r[3] or 0.0) - (r[2] or 0.0)) for r in settled if r[2] and r[3]]
    mean = sum(costs) / len(costs) if costs else 0.0
    mean_s = sum(seconds) / len(seconds) if seconds else 0.0
    return {"pilot_tasks": len(keys), "settled": len(settled), "failed": sum(r[0] == "error" for r in settled),
            "tasks": total_tasks, "mean_cost_usd": round(mean, 8), "p90_cost_usd": round(_quantile(costs, 0.9), 8),
            "projected_cost_usd": round(mean * total_tasks, 6),
            "projected_cost_p90_usd": round(_quantile(costs, 0.9) * total_tasks, 6),
            "mean_task_seconds": round(mean_s, 3),
            "projected_seconds": round(mean_s * total_tasks / max(1, workers), 1),
            "environments": {"checked": checked, "held_up": len(keys) - broken, "broken": broken}}


def report(run_dir: Path, proj: dict[str, Any]) -> None:
    with atomic_writer(run_dir / PILOT_FILE) as out:
        out.write(json.dumps(proj, indent=2) + "\n")
    print(f"\npilot: {proj['settled']} of {proj['pilot_tasks']} task(s) settled ({proj['failed']} failed); "
          f"${proj['mean_cost_usd']:.6f} per task on average (p90 ${proj['p90_cost_usd']:.6f}), "
          f"{proj['mean_task_seconds']:.1f} s each\n"
          f"  projection for all {proj['tasks']} tasks of this run: ${proj['projected_cost_usd']:.4f} "
          f"(p90 ${proj['projected_cost_p90_usd']:.4f}), about {_hours(proj['projected_seconds'])} "
          f"at num_workers\n  {_environments(proj)}\n"
          "  the same command without pilot=... runs the rest (the pilot's tasks are kept)", file=sys.stderr)


def _environments(proj: dict[str, Any]) -> str:
    """How many of the pilot tasks' environments held up preflight=oracle's check."""
    env = proj.get("environments") or {}
    if not env.get("checked"):
        return ("environments: not checked (add preflight=oracle to run each task's reference solution and "
                "verifier first; broken tasks are then never sent to the model)")
    return (f"environments: {env['held_up']} of {proj['pilot_tasks']} pilot task(s) held up, {env['broken']} broken "
            "(never sent to the model; left out of the projection)")


def sweep_total(run_dirs: list[Path], since: float) -> str | None:
    """One line adding up the projections of the sweep's jobs that ran as pilots in this command."""
    files = [d / PILOT_FILE for d in run_dirs]
    found = [json.loads(f.read_text()) for f in files if f.is_file() and f.stat().st_mtime >= since]
    if len(found) < 2:
        return None
    cost = sum(p["projected_cost_usd"] for p in found)
    p90 = sum(p["projected_cost_p90_usd"] for p in found)
    return (f"pilot projection for the whole sweep ({len(found)} jobs, {sum(p['tasks'] for p in found)} tasks): "
            f"${cost:.4f} (p90 ${p90:.4f}), about {_hours(sum(p['projected_seconds'] for p in found))} "
            "if the jobs run one after another")


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"
