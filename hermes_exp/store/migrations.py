"""Ledger schema migrations: small named functions, applied in order, recorded when applied."""

from __future__ import annotations

import time
from collections.abc import Callable

import sqlite_utils

Migration = Callable[[sqlite_utils.Database], None]
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


def apply(db: sqlite_utils.Database) -> list[str]:
    """Apply pending migrations, each in its own transaction; return the names applied."""
    if "_migrations" not in db.table_names():
        db["_migrations"].create({"name": str, "applied_at": float}, pk="name")
    done = {row["name"] for row in db["_migrations"].rows}
    applied = []
    for name, fn in MIGRATIONS:
        if name in done:
            continue
        with db.conn:
            fn(db)
            db["_migrations"].insert({"name": name, "applied_at": time.time()})
        applied.append(name)
    return applied
