"""Compression results in the ledger (`compressions`, keyed by the digest of row + settings)."""

from __future__ import annotations

import json
import time
from typing import Any

from hermes_exp.store.ledger import Ledger

# Outcomes kept in the ledger; `failed` (the summariser call failed) is retried by the next invocation.
STORED = ("skipped", "compressed", "over_limit", "rejected")


def get(ledger: Ledger, digest: str) -> dict[str, Any] | None:
    cursor = ledger.db.execute("SELECT * FROM compressions WHERE digest = ?", [digest])
    values = cursor.fetchone()
    if values is None:
        return None
    row = dict(zip([d[0] for d in cursor.description], values))
    row["conversations"] = json.loads(row["conversations"]) if row["conversations"] else None
    return row


def put(ledger: Ledger, digest: str, key: str, outcome: dict[str, Any]) -> None:
    if outcome["status"] not in STORED:
        return
    turns = outcome.get("conversations")
    row = {**outcome, "digest": digest, "key": key, "created_at": time.time(),
           "conversations": json.dumps(turns, ensure_ascii=False) if turns is not None else None}
    # INSERT OR REPLACE (every column is given): `upsert` first probes the connection for ON CONFLICT
    # support with a CREATE/DROP TABLE, which SQLite refuses ("database table is locked") while the
    # caller's read of the kept rows is still open on the same connection.
    with ledger.lock, ledger.db.conn:
        ledger.db["compressions"].insert(row, pk="digest", replace=True, alter=False)
