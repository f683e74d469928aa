"""Friendly SQL views over the ledger, for `sqlite3 ledger.db` / Datasette users and the report.

Each view reads `tasks` (and `json_extract` / `json_each` over its raw `result` JSON); nothing is
copied, so views are always current and cost nothing to keep. `create_views` is idempotent."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite_utils

# An assistant message carries reasoning natively or inline; mirrors hermes_exp.model.reasoning.
_HAS_REASONING = """(
    COALESCE(TRIM(json_extract(m.value, '$.reasoning')), '') <> ''
    OR COALESCE(TRIM(json_extract(m.value, '$.reasoning_content')), '') <> ''
    OR json_array_length(m.value, '$.reasoning_details') > 0
    OR json_extract(m.value, '$.content') LIKE '%<think>%_%</think>%'
    OR json_extract(m.value, '$.content') LIKE '%<REASONING_SCRATCHPAD>%_%</REASONING_SCRATCHPAD>%')"""

VIEWS: dict[str, str] = {
    # One row per task: what happened, what it cost, how long the conversation was.
    "task_summary": f"""
SELECT t.key, t.prompt_index, t.prompt, t.state, t.reason, t.error_class, t.error, t.attempts, t.batch_num,
       t.toolsets, t.api_calls, t.prompt_tokens, t.completion_tokens, t.reasoning_tokens,
       COALESCE(t.prompt_tokens, 0) + COALESCE(t.completion_tokens, 0) AS total_tokens, t.cost_usd,
       (SELECT COUNT(*) FROM json_each(t.result, '$.messages') m
         WHERE json_extract(m.value, '$.role') = 'assistant') AS turns,
       (SELECT COUNT(*) FROM json_each(t.result, '$.messages') m
         WHERE json_extract(m.value, '$.role') = 'assistant' AND {_HAS_REASONING}) AS reasoning_turns,
       COALESCE(json_array_length(t.result, '$.tool_calls'), 0) AS tool_calls,
       (SELECT COUNT(*) FROM json_each(t.result, '$.tool_calls') c
         WHERE json_extract(c.value, '$.failed')) AS failed_tool_calls,
       json_extract(t.result, '$.completed') AS completed, json_extract(t.result, '$.partial') AS partial,
       json_extract(t.result, '$.stop_reason') AS stop_reason,
       t.finished_at - t.started_at AS seconds, t.started_at, t.finished_at
FROM tasks t""",
    # One row per tool call, in call order within its task.
    "tool_calls": """
SELECT t.key, t.prompt_index, t.state, c.key AS seq, json_extract(c.value, '$.name') AS tool,
       COALESCE(json_extract(c.value, '$.failed'), 0) AS failed, json_extract(c.value, '$.offered') AS offered,
       json_extract(c.value, '$.seconds') AS seconds
FROM tasks t, json_each(t.result, '$.tool_calls') c""",
    # Per tool: calls, failures and success rate over every finished task, and over kept ones.
    "tool_calls_by_tool": """
SELECT tool, COUNT(*) AS calls, SUM(failed = 0) AS success, SUM(failed <> 0) AS failure,
       ROUND(100.0 * SUM(failed = 0) / COUNT(*), 2) AS success_rate,
       SUM(state = 'done') AS calls_in_kept, COUNT(DISTINCT key) AS tasks,
       ROUND(AVG(seconds), 4) AS avg_seconds
FROM tool_calls GROUP BY tool ORDER BY calls DESC""",
    # One row per message of every task's raw conversation.
    "messages": f"""
SELECT t.key, t.prompt_index, t.state, m.key AS position, json_extract(m.value, '$.role') AS role,
       json_extract(m.value, '$.content') AS content,
       json_extract(m.value, '$.tool_calls') AS tool_calls, json_extract(m.value, '$.tool_call_id') AS tool_call_id,
       CASE WHEN json_extract(m.value, '$.role') = 'assistant' THEN {_HAS_REASONING} END AS has_reasoning
FROM tasks t, json_each(t.result, '$.messages') m""",
    # How the run's tasks ended: state and, for filtered / failed tasks, why.
    "outcomes": """
SELECT state, COALESCE(reason, error_class) AS why, COUNT(*) AS tasks, SUM(api_calls) AS api_calls,
       SUM(COALESCE(prompt_tokens, 0) + COALESCE(completion_tokens, 0)) AS tokens, SUM(cost_usd) AS cost_usd
FROM tasks GROUP BY state, why ORDER BY state, tasks DESC""",
}


def create_views(db: sqlite_utils.Database, temp: bool = False) -> list[str]:
    """Create (or replace) every view; `temp` makes connection-local views, which a read-only
    connection may create. Returns the view names. Views that are already these are left as they
    are (opening a ledger writes nothing)."""
    if not temp and _current(db):
        return list(VIEWS)
    if not temp and not db.conn.in_transaction:
        db.conn.execute("BEGIN")  # one transaction: sqlite3 would commit each DROP and CREATE on its own
    for name, sql in VIEWS.items():
        db.execute(f"DROP VIEW IF EXISTS {'temp.' if temp else ''}[{name}]")
        db.execute(f"CREATE {'TEMP ' if temp else ''}VIEW [{name}] AS {sql.strip()}")
    if not temp:
        db.conn.commit()
    return list(VIEWS)


def _current(db: sqlite_utils.Database) -> bool:
    """Whether the ledger's views are exactly these (their text as kept in sqlite_master)."""
    stored = dict(db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'view'").fetchall())
    return stored == {name: f"CREATE VIEW [{name}] AS {sql.strip()}" for name, sql in VIEWS.items()}
