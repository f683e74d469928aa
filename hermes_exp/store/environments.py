"""preflight=oracle's verdicts in the ledger (`environments`, keyed by an environment's content key): a
later run checks an environment again only when its content changed, so its key did."""

from __future__ import annotations

import time
from typing import Any

from hermes_exp.store.ledger import Ledger

KEPT = ("ok", "broken")  # verdicts worth keeping; "unchecked" is cheap to say again, "failed" must be retried


def verdicts(ledger: Ledger, envs: list[str]) -> dict[str, dict[str, Any]]:
    """The kept verdicts of these environments: env -> {verdict, why, tail, task}."""
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(envs), 500):  # SQLite's bound-variable limit
        part = envs[start:start + 500]
        marks = ",".join("?" * len(part))
        for env, verdict, why, tail, task in ledger.db.execute(
                f"SELECT env, verdict, why, tail, task FROM environments WHERE env IN ({marks})", part):
            found[env] = {"verdict": verdict, "why": why, "tail": tail or "", "task": task}
    return found


def keep(ledger: Ledger, env: str, verdict: str, why: str, tail: str, task: str, seconds: float) -> None:
    """Record one environment's verdict (the parent alone writes the ledger)."""
    if verdict not in KEPT:
        return
    with ledger.lock, ledger.db.conn:
        ledger.db.conn.execute(
            "INSERT OR REPLACE INTO environments (env, verdict, why, tail, task, seconds, checked_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)", [env, verdict, why, tail, task, seconds, time.time()])
