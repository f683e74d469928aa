"""The ledger: one SQLite row per task in `<run_dir>/ledger.db`; the parent process is its only writer."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hermes_exp.errors import LedgerError
from hermes_exp.settings.file_modes import file_mode, make_dir
from hermes_exp.store import migrations
from hermes_exp.store.health import damaged, is_disk_full, storage_error
from hermes_exp.store.lazydb import Database
from hermes_exp.store.views import create_views

FINAL_STATES = ("done", "filtered")


class Ledger:
    def __init__(self, path: Path) -> None:
        make_dir(path.parent)
        self.path = path
        # SQLite gives its -wal and -shm files the database file's mode: created here, it takes the directory's
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, file_mode(path.parent)))
        # One connection shared by the parent's threads (joblib dispatches from callback threads);
        # every write holds the lock, so the parent stays the single, serialized writer.
        # sqlite-utils' Database, made on the first write: opening and reading a current ledger use
        # sqlite3 only (a settled run's no-op never imports sqlite-utils; store/lazydb.py).
        self.db = Database(sqlite3.connect(path, check_same_thread=False))
        self.lock = threading.RLock()
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA busy_timeout=5000")
            migrations.apply(self.db)
            with self.lock, self.db.conn:
                create_views(self.db)  # recreated on open, so they always match the current schema
            self.db.execute("SELECT COUNT(*) FROM tasks").fetchone()
        except sqlite3.DatabaseError as exc:
            self.db.close()
            if isinstance(exc, sqlite3.OperationalError) and not is_disk_full(exc):
                raise
            raise (storage_error(exc, path.parent) if is_disk_full(exc) else damaged(path, exc)) from exc
        self._batch: tuple[int, int] | None = None
        self.invocation: int | None = None  # this process's invocation, once started
        self._tool_lists: dict[str, str] = {}  # tool lists this connection has committed: text -> hash

    def close(self) -> None:
        self.db.close()

    # -- identity ---------------------------------------------------------------------------
    def meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        return row[0] if row else None

    def set_meta(self, values: dict[str, str]) -> None:
        with self.lock, self.db.conn:
            self.db["meta"].upsert_all([{"key": k, "value": v} for k, v in values.items()], pk="key")

    def claim_identity(self, identity: str, identity_config: dict[str, Any]) -> None:
        """Bind this run directory to one experiment, or refuse a different one."""
        existing = self.meta("identity")
        if existing in (None, identity):  # (re)written: a ledger from before kept never-saved prompts here
            config = json.dumps(identity_config, sort_keys=True)
            if existing is None or self.meta("identity_config") != config:
                self.set_meta({"identity": identity, "identity_config": config})
            return
        if existing != identity:
            old = json.loads(self.meta("identity_config") or "{}")
            differing = ", ".join(_diff(old, identity_config)) or "(unknown)"
            raise LedgerError(
                f"run directory {self.path.parent} holds another experiment (identity {existing}, "
                f"this config is {identity}); config keys that differ: {differing}",
                "choose a new run_name=..., revert those keys to continue the existing run, or add "
                "resume.new_identity=true to archive the old experiment and start this one here")

    # -- planning ---------------------------------------------------------------------------
    def states(self) -> dict[str, tuple[str, str | None]]:
        """key -> (state, error class) for every task this run has seen."""
        return {k: (s, c) for k, s, c in self.db.execute("SELECT key, state, error_class FROM tasks")}

    def mark_running(self, key: str, index: int, prompt: str, sample: int = 0) -> None:
        """Record that a task was dispatched. A `running` row left by a crash counts as not done."""
        now = time.time()
        with self.lock, self.db.conn:
            self.db.execute(
                "INSERT INTO tasks (key, prompt_index, prompt, state, attempts, started_at, updated_at, sample) "
                "VALUES (?, ?, ?, 'running', 0, ?, ?, ?) "
                "ON CONFLICT(key) DO UPDATE SET state = 'running', started_at = excluded.started_at, "
                "updated_at = excluded.updated_at",
                [key, index, prompt, now, now, sample])

    def reindex(self, indexed: list[tuple[int, str, int]]) -> None:
        """Keep prompt_index equal to each task's line in the current dataset file."""
        # Read once and update only what moved: an UPDATE per task (100k of them on every start of a
        # settled run) was a second of a no-op invocation.
        stored = dict(self.db.execute("SELECT key, prompt_index FROM tasks"))
        moved = [(slot[0], slot[1]) for slot in indexed if slot[1] in stored and stored[slot[1]] != slot[0]]
        del stored
        if not moved:
            return
        now = time.time()
        with self.lock, self.db.conn:
            self.db.conn.executemany("UPDATE tasks SET prompt_index = ?, updated_at = ? WHERE key = ?",
                                     [(index, now, key) for index, key in moved])

    def set_selection(self, keys: list[str] | None) -> None:
        """The tasks a narrowed selection covers (None: the whole dataset). Exports and statistics read
        only those rows; the others stay in the ledger, so widening the selection again reruns nothing."""
        digest = hashlib.blake2b("\n".join(sorted(keys)).encode(), digest_size=12).hexdigest() if keys is not None else ""
        if (self.meta("selection") or "") == digest:
            return
        with self.lock, self.db.conn:
            self.db.execute("DELETE FROM selection")
            self.db.conn.executemany("INSERT OR IGNORE INTO selection (key) VALUES (?)", [(k,) for k in keys or ()])
            self.db["meta"].upsert({"key": "selection", "value": digest}, pk="key")

    def _selected(self) -> str:
        """A WHERE clause part limiting `tasks` to the selection, when one is on."""
        return "tasks.key IN (SELECT key FROM selection)" if self.meta("selection") else ""

    # -- recording --------------------------------------------------------------------------
    def start_invocation(self) -> int:
        with self.lock, self.db.conn:
            table = self.db["invocations"].insert({"started_at": time.time(), "tasks_run": 0, "model_calls": 0})
        row = self.db.execute("SELECT COALESCE(MAX(batch_num), -1) FROM tasks").fetchone()
        self._batch = (row[0] + 1, 0)
        self.invocation = table.last_pk
        return table.last_pk

    def finish_invocation(self, invocation: int, tasks_run: int, model_calls: int) -> None:
        with self.lock, self.db.conn:
            self.db["invocations"].update(invocation, {"finished_at": time.time(), "tasks_run": tasks_run,
                                                       "model_calls": model_calls})

    def record(self, row: dict[str, Any], batch_size: int) -> None:
        """Commit one task's result. Finished tasks get the next slot of the current batch."""
        with self.lock:
            if row["state"] in FINAL_STATES:
                row["batch_num"] = self.next_batch(batch_size)
            # the row brings this dispatch's attempts and spend; the columns keep the sums over every
            # dispatch, added up by the upsert itself (one statement, no read first)
            row["attempts"] = row.pop("task_attempts", 1)
            row["spent_usd"] = row.get("spent_usd") or 0.0
            row["updated_at"] = time.time()
            row["spend_invocation"] = self.invocation
            tools = row.pop("tools", None)
            new_list = None
            with self.db.conn:
                if tools is not None:
                    row["tools_hash"], new_list = self._tool_list(tools)
                cursor = self.db.conn.execute(_record_sql(tuple(row)), list(row.values()))
                (row["attempts"], row["spent_usd"]), = cursor.fetchall()
            if new_list is not None:  # committed: later rows with the same list need not write it
                self._tool_lists[tools] = new_list

    def _tool_list(self, tools: str) -> tuple[str, str | None]:
        """Keep a tool list (JSON text exactly as sent) once; return its hash, and the hash again when
        this call wrote it (to remember once its transaction is committed)."""
        digest = self._tool_lists.get(tools)
        if digest is not None:
            return digest, None
        digest = "b2:" + hashlib.blake2b(tools.encode(), digest_size=16).hexdigest()
        self.db.execute("INSERT OR IGNORE INTO tool_lists (hash, tools) VALUES (?, ?)", [digest, tools])
        return digest, digest

    def next_batch(self, batch_size: int) -> int:
        """The batch number of the next task to finish (batches continue across invocations)."""
        with self.lock:
            if self._batch is None:
                row = self.db.execute("SELECT COALESCE(MAX(batch_num), -1) FROM tasks").fetchone()
                self._batch = (row[0] + 1, 0)
            batch, used = self._batch
            self._batch = (batch + 1, 0) if used + 1 >= batch_size else (batch, used + 1)
            return batch

    def add_spend(self, key: str, usd: float, invocation: int | None = None) -> None:
        """Count money spent on a task whose result is not recorded (stopped by the budget, cancelled, or
        in flight when the run was killed: then `invocation` is the one that spent it)."""
        with self.lock, self.db.conn:
            self.db.execute("UPDATE tasks SET spent_usd = COALESCE(spent_usd, 0) + ?, spend_invocation = ? "
                            "WHERE key = ?", [usd, invocation or self.invocation, key])

    def spend_invocations(self) -> dict[str, int | None]:
        """key -> the invocation whose spend the row already counts."""
        return dict(self.db.execute("SELECT key, spend_invocation FROM tasks").fetchall())

    def spent_usd(self) -> float:
        """What this run has spent, over every invocation and every attempt, summaries of action=compress
        included (the budget's starting point)."""
        tasks = self.totals()[2]
        summaries = self.db.execute("SELECT COALESCE(SUM(cost_usd), 0) FROM compressions").fetchone()[0]
        return float(tasks) + float(summaries)

    def set_state(self, key: str, state: str, reason: str | None) -> None:
        with self.lock, self.db.conn:
            self.db.execute("UPDATE tasks SET state = ?, reason = ?, updated_at = ? WHERE key = ?",
                            [state, reason, time.time(), key])

    # -- reading ----------------------------------------------------------------------------
    def rows(self, states: tuple[str, ...] | None = None, order: str = "prompt_index, key",
             results: bool = True) -> Iterator[dict[str, Any]]:
        """Rows (dataset order by default), streamed, with `tools` (the tool list sent, JSON text);
        result JSON is decoded by the caller. Without `results`, neither `result` nor `tools` (see
        `result_of`)."""
        clauses = [f"state IN ({','.join('?' * len(states))})" if states else "", self._selected()]
        where = " AND ".join(c for c in clauses if c)
        where = f"WHERE {where}" if where else ""
        if results:
            columns = "tasks.*, tool_lists.tools AS tools FROM tasks LEFT JOIN tool_lists ON tool_lists.hash = tasks.tools_hash"
        else:
            names = [c[1] for c in self.db.execute("PRAGMA table_info(tasks)") if c[1] != "result"]
            columns = ", ".join(f'tasks."{n}"' for n in names) + " FROM tasks"
        cursor = self.db.execute(f"SELECT {columns} {where} ORDER BY {order}", list(states or ()))
        names = [d[0] for d in cursor.description]
        for values in cursor:
            yield dict(zip(names, values))

    def result_of(self, key: str) -> tuple[str | None, str | None]:
        """A task's raw result (JSON text) and the tool list it was sent (`rows` without results)."""
        found = self.db.execute("SELECT tasks.result, tool_lists.tools FROM tasks LEFT JOIN tool_lists "
                                "ON tool_lists.hash = tasks.tools_hash WHERE tasks.key = ?", [key]).fetchone()
        return (found[0], found[1]) if found else (None, None)

    def fingerprint(self) -> str:
        """Changes whenever anything the exports are made of changes (rows, spend, invocations)."""
        tasks = self.totals(keep=True)
        runs = self.db.execute("SELECT MAX(id), MAX(finished_at) FROM invocations").fetchone()
        return json.dumps([*tasks, *runs, self.meta("selection")])

    def derived(self, name: str) -> Any:
        """What was kept with `set_derived` (JSON), while no task row was written since; else None."""
        return derived_value(self.meta(f"derived:{name}"))

    def set_derived(self, name: str, value: Any) -> None:
        """Keep something derived from the tasks table as it is now; the next write of a task row, by
        anyone, deletes it (migration m010's triggers)."""
        self.set_meta({f"derived:{name}": json.dumps(value)})

    def totals(self, keep: bool = False) -> tuple[int, float | None, float]:
        """COUNT(*), MAX(updated_at) and TOTAL(spent_usd) of the tasks table: counted (a full read of the
        table, results and all) only when a task row was written since the last count was kept (`keep`:
        by the export, after a run's last write; a run's start keeps nothing its first write would drop)."""
        with self.lock:  # no write of this process's threads between the count and keeping it
            kept = self.derived("totals")
            if isinstance(kept, list) and len(kept) == 3:
                return kept[0], kept[1], kept[2]
            count, updated, spent = self.db.execute(
                "SELECT COUNT(*), MAX(updated_at), TOTAL(spent_usd) FROM tasks").fetchone()
            if keep:
                self.set_derived("totals", [count, updated, spent])
            return count, updated, spent

    def invocations(self) -> list[dict[str, Any]]:
        return list(self.db["invocations"].rows)


@functools.lru_cache(maxsize=64)
def _record_sql(columns: tuple[str, ...]) -> str:
    """sqlite-utils' upsert of a task row (insert, or update only these columns) as one statement (its
    own upsert reads the table's schema on every call, a dozen queries per recorded task), adding the
    row's attempts and spend to what the task's earlier dispatches left and returning both sums."""
    names = ", ".join(f'"{c}"' for c in columns)
    updates = ", ".join(_summed.get(c, f'"{c}" = excluded."{c}"') for c in columns if c != "key")
    return (f"INSERT INTO tasks ({names}) VALUES ({', '.join('?' * len(columns))}) "
            f"ON CONFLICT(key) DO UPDATE SET {updates} RETURNING attempts, spent_usd")


_summed = {"attempts": '"attempts" = COALESCE(tasks.attempts, 0) + excluded.attempts',
           "spent_usd": '"spent_usd" = COALESCE(tasks.spent_usd, 0.0) + excluded.spent_usd'}


def _diff(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    keys = sorted(set(old) | set(new))
    out: list[str] = []
    for key in keys:
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out.extend(_diff(a, b, f"{prefix}{key}."))
        elif a != b:
            out.append(f"{prefix}{key} ({a!r} -> {b!r})")
    return out


def derived_value(text: str | None) -> Any:
    """A `derived:*` meta row's value: its JSON, or None (absent, or not JSON: it is only a cache)."""
    try:
        return json.loads(text) if text is not None else None
    except ValueError:
        return None
