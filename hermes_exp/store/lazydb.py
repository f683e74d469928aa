"""The ledger's connection, with sqlite-utils' Database made on first use: reads (SELECT, PRAGMA) run on
the sqlite3 connection itself, as sqlite-utils would run them, so an invocation that only reads the
ledger (a settled run's no-op) never imports sqlite-utils, its click and pluggy, nor loads its plugins
(~0.12 s of CPU). Anything else (writes, tables, upserts) goes through sqlite-utils as before."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

READS = ("SELECT", "PRAGMA")  # statements that never open an implicit transaction in sqlite3


class Database:
    """`sqlite_utils.Database(conn)`, built when first needed (see the module's docstring)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._real: Any = None
        self.conn.execute("PRAGMA recursive_triggers=on;")  # what sqlite-utils sets on every connection

    @property
    def real(self) -> Any:
        if self._real is None:
            from hermes_exp.store.lean import sqlite_utils

            self._real = sqlite_utils.Database(self.conn)
        return self._real

    def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] | None = None) -> sqlite3.Cursor:
        if self._real is None and sql.lstrip()[:6].upper() in READS:
            return self.conn.execute(sql) if parameters is None else self.conn.execute(sql, parameters)
        return self.real.execute(sql, parameters)

    def close(self) -> None:
        self.conn.close()

    def __getitem__(self, name: str) -> Any:
        return self.real[name]

    def __getattr__(self, name: str) -> Any:  # table_names, atomic, ...: sqlite-utils' own
        return getattr(self.real, name)
