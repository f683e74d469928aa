"""Ledger schema migrations: small named functions, applied in order, recorded when applied."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by the ledger when it first writes (store/lazydb.py)
    import sqlite_utils

Migration = Callable[["sqlite_utils.Database"], None]
MIGRATIONS: list[tuple[str, Migration]] = []


def migration(fn: Migration) -> Migration:
    MIGRATIONS.append((fn.__name__, fn))
    return fn


@migration
def m001_initial(db: sqlite_utils.Database) -> None:
    db["meta"].create({"key": str, "value": str}, pk="key")
    db["tasks"].create(
        {"key": str, "prompt_index": int, "prompt": str, "state": str, "reason": str, "error_class": str,
         "error": str, "attempts": int, "batch_num": int, "toolsets": str, "result": str,
         "api_calls": int, "prompt_tokens": int, "completion_tokens": int, "reasoning_tokens": int,
         "cost_usd": float, "started_at": float, "finished_at": float, "updated_at": float},
        pk="key")
    db["tasks"].create_index(["state"])
    db["invocations"].create(
        {"id": int, "started_at": float, "finished_at": float, "tasks_run": int, "model_calls": int},
        pk="id")


@migration
def m002_order_indexes(db: sqlite_utils.Database) -> None:
    """Exports read tasks in dataset order and batch order; index both."""
    db["tasks"].create_index(["prompt_index"], if_not_exists=True)
    db["tasks"].create_index(["batch_num"], if_not_exists=True)


@migration
def m003_spend_and_cached_tokens(db: sqlite_utils.Database) -> None:
    """`spent_usd`: what every attempt of a task cost, so a resumed run's budget counts it all;
    `cost_usd` stays the cost of the recorded attempt. Plus prompt tokens served from a cache."""
    db["tasks"].add_column("spent_usd", float)
    db["tasks"].add_column("cached_tokens", int)
    db.execute("UPDATE tasks SET spent_usd = cost_usd WHERE cost_usd IS NOT NULL")


@migration
def m004_tool_lists(db: sqlite_utils.Database) -> None:
    """The OpenAI tool list sent to each task, kept once per distinct list (`tool_lists`, keyed by a
    hash of its JSON) and referenced from `tasks.tools_hash`: a run has few distinct lists."""
    db["tool_lists"].create({"hash": str, "tools": str}, pk="hash")
    db["tasks"].add_column("tools_hash", str)


@migration
def m005_compressions(db: sqlite_utils.Database) -> None:
    """One row per (trajectory content, compression settings): what compressing it gave, and what the
    summariser calls cost, so `action=compress` never recomputes (or pays for) the same result."""
    db["compressions"].create(
        {"digest": str, "key": str, "status": str, "conversations": str, "tokens_before": int, "tokens_after": int,
         "turns_summarised": int, "summary_tokens": int, "error": str, "api_calls": int, "prompt_tokens": int,
         "completion_tokens": int, "cost_usd": float, "created_at": float}, pk="digest")


@migration
def m006_selection(db: sqlite_utils.Database) -> None:
    """The keys the last invocation's dataset selection (slice, where, ids) covers: statistics and
    exports follow it while meta `selection` is on; the tasks table keeps every task ever run."""
    db["selection"].create({"key": str}, pk="key")

@migration
def m007_cache_write_tokens(db: sqlite_utils.Database) -> None:
    """Prompt tokens written to the provider's cache (Anthropic bills them above the prompt price)."""
    db["tasks"].add_column("cache_write_tokens", int)


@migration
def m008_stop_reason_and_context_tokens(db: sqlite_utils.Database) -> None:
    """Why each sample stopped, and its length in tokens (the last call's prompt + completion), so a
    compression target can be chosen from the ledger alone."""
    db["tasks"].add_column("stop_reason", str)
    db["tasks"].add_column("context_tokens", int)


@migration
def m007_spend_invocation(db: sqlite_utils.Database) -> None:
    """The invocation whose spend on a task the row already counts: the spend journal (spend_journal.py)
    adds only what no recorded result of that invocation accounts for."""
    db["tasks"].add_column("spend_invocation", int)


@migration
def m009_samples_and_scores(db: sqlite_utils.Database) -> None:
    """`sample`: the task's number among samples_per_prompt; `archive`: its workdir archive (relative
    to the run dir). `scores`: one verification per (task key, verifier identity), beside the result."""
    db["tasks"].add_column("sample", int, not_null_default=0)
    db["tasks"].add_column("archive", str)
    db["tasks"].add_column("archive_bytes", int)
    db["scores"].create(
        {"key": str, "verifier": str, "kind": str, "reward": float, "passed": int, "details": str,
         "seconds": float, "error": str, "api_calls": int, "cost_usd": float, "usage": str, "scored_at": float},
        pk=("key", "verifier"))
    db["scores"].create_index(["verifier"])


@migration
def m010_derived(db: sqlite_utils.Database) -> None:
    """Meta rows named `derived:*` hold what was derived from the whole tasks table (its totals, a
    settled run's plan): any insert, update or delete of a task row, whoever writes it, deletes them
    (triggers), so while one is there it still holds. A write finds none to delete after the first,
    so a run's commits write no page more."""
    for event in ("INSERT", "UPDATE", "DELETE"):
        db.execute(f"CREATE TRIGGER IF NOT EXISTS tasks_{event.lower()}_clears_derived AFTER {event} ON tasks "
                   f"WHEN EXISTS (SELECT 1 FROM meta WHERE {DERIVED}) BEGIN DELETE FROM meta WHERE {DERIVED}; END")


@migration
def m011_suspect_scores(db: sqlite_utils.Database) -> None:
    """`scores.suspect`: why a verification that did not pass looks like an infrastructure failure
    (verifier_suspect, hermes_exp/verify/suspect.py); NULL for every score before it and every other one."""
    db["scores"].add_column("suspect", str)


@migration
def m012_environment_checks(db: sqlite_utils.Database) -> None:
    """preflight=oracle's verdict on each environment (keyed by its content: the row without its prompt,
    the verifier it gets, the sandbox; a Harbor task's folder digest), so a later run checks it again only
    when it changed."""
    db["environments"].create({"env": str, "verdict": str, "why": str, "tail": str, "task": str,
                               "seconds": float, "checked_at": float}, pk="env")


DERIVED = "key >= 'derived:' AND key < 'derived;'"  # the meta keys that start with "derived:"


def apply(db: sqlite_utils.Database) -> list[str]:
    """Apply pending migrations, each in its own transaction; return the names applied. A current
    ledger is only read (plain SELECTs: no sqlite-utils needed to open it)."""
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    done = {row[0] for row in db.execute("SELECT name FROM _migrations")} if "_migrations" in tables else set()
    if all(name in done for name, _ in MIGRATIONS):
        return []
    if "_migrations" not in tables:
        db["_migrations"].create({"name": str, "applied_at": float}, pk="name")
    applied = []
    for name, fn in MIGRATIONS:
        if name in done:
            continue
        with db.atomic():  # BEGIN..COMMIT: sqlite3 would commit each CREATE and ALTER on its own
            fn(db)
            db["_migrations"].insert({"name": name, "applied_at": time.time()})
        applied.append(name)
    return applied
