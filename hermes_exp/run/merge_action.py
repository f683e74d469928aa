"""`action=merge`: the ledgers of a run's shards (`dataset.shard=I/N`, each in its own run directory) joined
into this run directory's ledger, then exported as one run: one set of outputs, one statistics.json (pass@k
over every sample of every shard). Shards of different experiments are refused; the merged ledger is
rebuilt from the shards on every merge, so merging again after a shard resumed picks up its new work."""

from __future__ import annotations

import glob
import json
import sqlite3
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from hermes_exp.errors import ConfigError, LedgerError
from hermes_exp.run.checks import Checked
from hermes_exp.run.export_action import reexport
from hermes_exp.run.lock import RunLock
from hermes_exp.settings.resolved import stored_identity
from hermes_exp.store.ledger import Ledger

MERGED_FROM = "merged_from"  # meta key of a merged ledger: the shard directories, as JSON
SHARDS_HINT = ("list the shards' run directories, e.g. merge.shards=[outputs/part_0,outputs/part_1], or a glob: "
               "merge.shards='outputs/part_*'")
# What a merge copies of each shard besides its tasks (batch numbers are shifted past the earlier shards').
ALSO = ("tool_lists", "scores", "compressions")


def merge_run(checked: Checked) -> int:
    """Join the shards named by `merge.shards` into this run directory's ledger, then export it."""
    run_dir = checked.prepared.run_dir
    if checked.prepared.selection.shard is not None:
        raise ConfigError(f"action=merge joins shards: dataset.shard={checked.settings['dataset']['shard']!r} "
                          "would cut the merged run to one shard again", "drop dataset.shard from the merge command")
    shards = shard_dirs((checked.settings.get("merge") or {}).get("shards"), run_dir)
    identities = {shard: _meta(shard, "identity") for shard in shards}
    _same_experiment(checked, identities)
    with ExitStack() as held:
        for shard in shards:  # a shard still running is refused (its lock names the process)
            held.enter_context(RunLock(shard))
        with RunLock(run_dir):
            copied, repeated = _rebuild(checked, shards)
    print(f"merged {copied} task(s) of {len(shards)} shard(s) into {run_dir / 'ledger.db'}", file=sys.stderr)
    if repeated:
        print(f"{repeated} task(s) are in more than one shard (the same shard given twice?): each kept once, "
              "from the first shard listed that has it", file=sys.stderr)
    return reexport(checked)


def shard_dirs(raw: Any, run_dir: Path) -> list[Path]:
    """`merge.shards`: run directories or globs (a string or a list), each holding a ledger."""
    if not raw:
        raise ConfigError("action=merge needs merge.shards: the shards' run directories", SHARDS_HINT)
    patterns = [raw] if isinstance(raw, str) else list(raw)
    found: list[Path] = []
    for pattern in map(str, patterns):
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        if not matches:
            raise ConfigError(f"merge.shards: {pattern!r} matches no directory", SHARDS_HINT)
        found.extend(Path(m).resolve() for m in matches)
    shards = [p for p in dict.fromkeys(found) if p != run_dir]  # a glob may match the merged run itself
    missing = [str(p) for p in shards if not (p / "ledger.db").is_file()]
    if missing or not shards:
        raise ConfigError(f"merge.shards: no ledger.db in {', '.join(missing) or raw!r}", SHARDS_HINT)
    return shards


def _meta(run_dir: Path, key: str) -> str | None:
    with sqlite3.connect(f"file:{run_dir / 'ledger.db'}?mode=ro", uri=True) as db:
        row = db.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
    return row[0] if row else None


def _same_experiment(checked: Checked, identities: dict[Path, str | None]) -> None:
    """Every shard ran the experiment this command's config describes, or the merge is refused."""
    mine = checked.prepared.identity
    others = {shard: ident for shard, ident in identities.items() if ident != mine}
    if not others:
        return
    config = stored_identity(checked.settings)
    lines = [f"  {shard}: identity {ident}; keys that differ from this command's config: "
             f"{', '.join(_diff(json.loads(_meta(shard, 'identity_config') or '{}'), config)) or '(unknown)'}"
             for shard, ident in others.items()]
    raise LedgerError(f"action=merge: {len(others)} of {len(identities)} shard(s) ran another experiment than "
                      f"this config ({mine}):\n" + "\n".join(lines),
                      "merge only the shards of one experiment, with the overrides they ran with (see each "
                      "shard's .hydra/overrides.yaml) and without dataset.shard")


def _diff(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out.extend(_diff(a, b, f"{prefix}{key}."))
        elif a != b:
            out.append(f"{prefix}{key} ({a!r} -> {b!r})")
    return out


def _rebuild(checked: Checked, shards: list[Path]) -> tuple[int, int]:
    """The merged ledger, made anew from the shards; return (tasks copied, tasks found in two shards)."""
    run_dir = checked.prepared.run_dir
    for shard in shards:
        Ledger(shard / "ledger.db").close()  # an older shard's schema brought up to date (we hold its lock)
    ledger = Ledger(run_dir / "ledger.db")
    try:
        _refuse_a_run(ledger, run_dir)
        ledger.claim_identity(checked.prepared.identity, stored_identity(checked.settings))
        with ledger.lock, ledger.db.conn:
            for table in ("tasks", "scores", "invocations"):
                ledger.db.execute(f"DELETE FROM {table}")
        copied = sum(_copy(ledger, shard) for shard in shards)
        ledger.set_meta({MERGED_FROM: json.dumps([str(s) for s in shards])})
        total = ledger.db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]
        return total, copied - total
    finally:
        ledger.close()


def _refuse_a_run(ledger: Ledger, run_dir: Path) -> None:
    """A merge rebuilds its ledger: it must never do so over a run's own tasks."""
    if ledger.meta(MERGED_FROM) is None and ledger.db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]:
        raise LedgerError(f"action=merge: {run_dir} holds a run of its own, not a merge of shards",
                          "choose another run_name=... for the merged run (e.g. run_name=<name>_merged)")


def _copy(ledger: Ledger, shard: Path) -> int:
    """Copy one shard's rows into the merged ledger; return how many task rows it has."""
    db = ledger.db.conn
    db.execute("ATTACH DATABASE ? AS shard", [str(shard / "ledger.db")])
    try:
        with ledger.lock, db:
            shift = db.execute("SELECT COALESCE(MAX(batch_num) + 1, 0) FROM main.tasks").fetchone()[0]
            names = [row[1] for row in db.execute("PRAGMA main.table_info(tasks)")]
            columns = ", ".join(f'"{n}"' for n in names)
            picked = ", ".join("batch_num + ?" if n == "batch_num" else f'"{n}"' for n in names)
            db.execute(f"INSERT OR IGNORE INTO main.tasks ({columns}) SELECT {picked} FROM shard.tasks", [shift])
            for table in ALSO:
                db.execute(f"INSERT OR IGNORE INTO main.{table} SELECT * FROM shard.{table}")
            db.execute("INSERT INTO main.invocations (started_at, finished_at, tasks_run, model_calls) "
                       "SELECT started_at, finished_at, tasks_run, model_calls FROM shard.invocations")
            db.execute("INSERT OR IGNORE INTO main.meta SELECT * FROM shard.meta WHERE key = 'mcp_tools'")
            return db.execute("SELECT COUNT(*) FROM shard.tasks").fetchone()[0]
    finally:
        db.execute("DETACH DATABASE shard")
