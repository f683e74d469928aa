"""What a report shows, read from run directories: aggregates from the ledger (through the SQL views,
on a read-only connection) and a capped sample of trajectories for the browser."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlite_utils

from hermes_exp.errors import HermesExpError
from hermes_exp.report.segments import Score, entry
from hermes_exp.store.sharegpt import conversations
from hermes_exp.store.views import create_views
from hermes_exp.worker.result import PHASES

FINISHED = "state IN ('done', 'filtered')"


@dataclass
class RunData:
    """One run's numbers for the charts, plus its sample of trajectories for the browser."""

    label: str
    path: Path
    model: str = ""
    distribution: str = ""
    states: dict[str, int] = field(default_factory=dict)
    reasons: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)
    turns: dict[int, int] = field(default_factory=dict)  # turns per trajectory -> how many trajectories
    reasoning: tuple[int, int] = (0, 0)  # (assistant turns with reasoning, all assistant turns)
    tokens: dict[str, int] = field(default_factory=dict)
    cost: float | None = None
    entries: list[dict[str, Any]] = field(default_factory=list)
    verification: dict[str, Any] | None = None  # statistics.json's `verification` (pass rate, pass@k, ...)
    visible: str = "1"  # SQL condition: the tasks statistics.json counts
    phases: dict[str, float] = field(default_factory=dict)  # mean seconds per phase over finished timed tasks

    @property
    def total(self) -> int:
        return sum(self.states.values())

    @property
    def total_tokens(self) -> int:
        """Prompt + completion, as statistics.json and the CLI count them: reasoning tokens are part of
        the completion (the providers' usage reports them inside it), so they are not added again."""
        return self.tokens.get("prompt", 0) + self.tokens.get("completion", 0)

    @property
    def coverage(self) -> float:
        with_reasoning, turns = self.reasoning
        return round(100 * with_reasoning / turns, 2) if turns else 0.0


def find_runs(path: Path) -> list[Path]:
    """`path` itself if it is a run directory, else the run directories below it (a sweep, or an
    outputs folder of runs and sweeps)."""
    if (path / "ledger.db").is_file():
        return [path]
    runs = sorted(p.parent for p in path.rglob("ledger.db"))
    if not runs:
        raise HermesExpError(f"{path} is neither a run directory (no ledger.db) nor a sweep directory "
                             "(no subdirectory with a ledger.db)",
                             "pass outputs/<run_name>, or outputs/<run_name> of a -m sweep")
    return runs


def _open(db_path: Path) -> sqlite_utils.Database:
    """Read-only, so a report can be made while the run is still writing."""
    conn = sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro", uri=True)
    db = sqlite_utils.Database(conn)
    create_views(db, temp=True)
    return db


def load_run(run_dir: Path, label: str, budget: int) -> RunData:
    """Aggregates of one run and at most `budget` trajectories for the browser."""
    db = _open(run_dir / "ledger.db")
    try:
        ident = json.loads(_scalar(db, "SELECT value FROM meta WHERE key = 'identity_config'") or "{}")
        run = RunData(label=label, path=run_dir, model=(ident.get("model") or {}).get("name", ""),
                      distribution=(ident.get("distribution") or {}).get("name", ""))
        stats = _statistics(run_dir)
        run.verification = stats.get("verification")
        _aggregate(db, run, _visible(stats))
        run.phases = _phases(db, run.visible)
        run.entries = _sample(db, run_dir, run, budget)
    finally:
        db.close()
    return run


def _statistics(run_dir: Path) -> dict[str, Any]:
    """statistics.json as the run's last export wrote it ({} before the first)."""
    try:
        return json.loads((run_dir / "statistics.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _visible(stats: dict[str, Any]) -> str:
    """The tasks the exports count: samples beyond samples_per_prompt (it was lowered) stay in the
    ledger, out of statistics.json, and so out of the report."""
    samples = stats.get("samples_per_prompt")
    where = f"sample < {int(samples)}" if isinstance(samples, int) else "1"
    return f"key IN (SELECT key FROM tasks WHERE {where})"


def _scalar(db: sqlite_utils.Database, sql: str) -> Any:
    row = db.execute(sql).fetchone()
    return row[0] if row else None


def _aggregate(db: sqlite_utils.Database, run: RunData, visible: str) -> None:
    pairs = lambda sql: {k: v for k, v in db.execute(sql).fetchall()}  # noqa: E731
    run.states = pairs(f"SELECT state, COUNT(*) FROM tasks WHERE {visible} GROUP BY state")
    run.reasons = pairs("SELECT COALESCE(reason, 'unknown'), COUNT(*) FROM tasks WHERE state = 'filtered' "
                        f"AND {visible} GROUP BY 1 ORDER BY 2 DESC")
    run.errors = pairs("SELECT COALESCE(error_class, 'unknown'), COUNT(*) FROM tasks WHERE state = 'error' "
                       f"AND {visible} GROUP BY 1 ORDER BY 2 DESC")
    # Over kept tasks, as statistics.json counts them (filtered ones are in "Why tasks were filtered").
    run.tools = list(db.query("SELECT tool, COUNT(*) AS calls, SUM(failed = 0) AS success, "
                              "ROUND(100.0 * SUM(failed = 0) / COUNT(*), 2) AS success_rate FROM tool_calls "
                              f"WHERE state = 'done' AND {visible} GROUP BY tool ORDER BY calls DESC, tool"))
    run.turns = pairs(f"SELECT turns, COUNT(*) FROM task_summary WHERE {FINISHED} AND {visible} "
                      "GROUP BY turns ORDER BY turns")
    row = db.execute("SELECT COALESCE(SUM(reasoning_turns), 0), COALESCE(SUM(turns), 0) FROM task_summary "
                     f"WHERE state = 'done' AND {visible}").fetchone()  # kept tasks, as statistics.json's coverage
    run.reasoning = (row[0], row[1])
    row = db.execute("SELECT COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0), "
                     f"COALESCE(SUM(reasoning_tokens), 0), SUM(cost_usd) FROM tasks WHERE {visible}").fetchone()
    run.tokens = {"prompt": row[0], "completion": row[1], "reasoning": row[2]}
    run.cost = row[3]
    run.visible = visible


def _phases(db: sqlite_utils.Database, visible: str) -> dict[str, float]:
    """Mean seconds per phase (sandbox start, fixtures, agent, verifier, close) over the finished tasks
    that recorded it; results recorded before timings were kept have none and are left out."""
    spans: dict[str, list[float]] = {}
    for (text,) in db.execute(f"SELECT json_extract(result, '$.timings') FROM tasks WHERE {FINISHED} "
                              f"AND {visible} AND result IS NOT NULL"):
        for name, seconds in (json.loads(text) if text else {}).items():
            spans.setdefault(name, []).append(seconds)
    return {name: sum(spans[name]) / len(spans[name]) for name in PHASES if name in spans}


def _timings(db: sqlite_utils.Database, entries: list[dict[str, Any]], visible: str) -> None:
    """Each kept entry's phase timings, from its ledger row (trajectories.jsonl does not carry them)."""
    indexes = sorted({e["index"] for e in entries if e["index"] is not None})
    found: dict[tuple[int, int], Any] = {}
    for start in range(0, len(indexes), 500):  # under SQLite's limit of bound parameters
        chunk = indexes[start:start + 500]
        found.update(((i, s or 0), json.loads(t) if t else None) for i, s, t in db.execute(
            f"SELECT prompt_index, sample, json_extract(result, '$.timings') FROM tasks WHERE state = 'done' "
            f"AND {visible} AND prompt_index IN ({', '.join('?' * len(chunk))})", chunk))
    for e in entries:
        e["timings"] = found.get((e["index"], e["sample"] or 0))


def _latest(db: sqlite_utils.Database, column: str) -> str:
    """SQL for one column of a task's latest score (NULL in a ledger without it). A sample's verdict is its
    latest score: the report has no config to tell which verifier the export would give its row, and a
    re-score (action=score) is the latest."""
    if "scores" not in db.table_names() or column not in db["scores"].columns_dict:
        return "NULL"
    return f"(SELECT {column} FROM scores s WHERE s.key = t.key ORDER BY s.scored_at DESC LIMIT 1)"


def _suspect_kept(db: sqlite_utils.Database, entries: list[dict[str, Any]], visible: str) -> None:
    """Kept entries whose latest score is verifier_suspect (trajectories.jsonl carries reward and passed only)."""
    suspect = _latest(db, "suspect")
    if suspect == "NULL":
        return
    marked = set(db.execute(f"SELECT prompt_index, COALESCE(sample, 0) FROM tasks t WHERE state = 'done' AND "
                            f"{visible} AND {suspect} IS NOT NULL"))
    for e in entries:
        if (e["index"], e["sample"] or 0) in marked and e["verdict"] is not None:
            e["verdict"] = "suspect"


def _sample(db: sqlite_utils.Database, run_dir: Path, run: RunData, budget: int) -> list[dict[str, Any]]:
    """Kept trajectories from trajectories.jsonl (what a user trains on), then filtered and failed
    tasks from the ledger, which keep up to a quarter of the budget so their reasons can be seen."""
    others = run.states.get("filtered", 0) + run.states.get("error", 0)
    kept_budget = budget - min(others, budget // 4)
    entries = _kept(run_dir / "trajectories.jsonl", run.label, kept_budget)
    _timings(db, entries, run.visible)
    _suspect_kept(db, entries, run.visible)
    latest = ", ".join(_latest(db, column) for column in ("reward", "passed", "suspect"))
    rows = db.execute(f"SELECT prompt_index, prompt, state, reason, error_class, error, result, sample, {latest} FROM tasks t "
                      f"WHERE state IN ('filtered', 'error') AND {run.visible} ORDER BY prompt_index, key LIMIT ?",
                      [budget - len(entries)])
    for index, prompt, state, reason, error_class, error, result, sample, reward, passed, suspect in rows:
        raw = json.loads(result) if result else {}
        messages = raw.get("messages") or []
        turns = conversations(messages) if messages else [{"from": "error", "value": error or "(no message)"}]
        score = Score(sample, reward, None if passed is None else bool(passed), error_class == "verifier",
                      bool(suspect))
        entries.append(entry(run.label, index, state, reason or error_class, prompt, turns, score,
                             raw.get("timings")))
    return entries


def _kept(path: Path, label: str, budget: int) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    if not path.is_file():
        return entries
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if len(entries) >= budget:
                break
            row = json.loads(line)
            turns = row.get("conversations", [])
            prompt = next((t["value"] for t in turns if t.get("from") == "human"), "")
            score = Score(row.get("sample"), row.get("reward"), row.get("passed"))  # as the export wrote it
            entries.append(entry(label, row.get("prompt_index"), "done", None, prompt, turns, score))
    return entries


def short_labels(names: list[str]) -> list[str]:
    """Sweep job directories are named by their overrides (`a.b=1,c=2`): keep only the overrides that
    differ between jobs, each by the last part of its key when that is unambiguous."""
    if len(names) < 2:
        return names
    split = [[p for p in name.split(",") if p] for name in names]
    common = set.intersection(*(set(parts) for parts in split))
    varying = [[p for p in parts if p not in common] for parts in split]
    keys = {p.partition("=")[0] for parts in varying for p in parts}
    tails = {k: k.rsplit(".", 1)[-1] for k in keys}
    if len(set(tails.values())) < len(keys):
        tails = {k: k for k in keys}
    labels = [",".join(f"{tails[p.partition('=')[0]]}={p.partition('=')[2]}" for p in parts) for parts in varying]
    return labels if len(set(labels)) == len(labels) and all(labels) else names


def load(path: Path, max_trajectories: int) -> list[RunData]:
    """Every run under `path`, labelled by what sets it apart (its override values, in a sweep)."""
    runs = find_runs(path)
    budget = max(1, max_trajectories // len(runs))
    names = [run.relative_to(path).as_posix() if run != path else run.name for run in runs]
    # A sweep's job directories are named by their overrides: shortened to those that differ.
    labels = short_labels(names) if not any("/" in n for n in names) else names
    return [load_run(run, label, budget) for run, label in zip(runs, labels)]
