"""What the parent does once instead of per recorded task (bench/RESULTS.md, sixth pass): a result's
row is one upsert that adds up attempts and spend itself, a tool list is written and hashed once per
ledger connection (looked for again after a failed write), and its JSON made once per distinct list."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest

from hermes_exp.store import rows as rows_mod
from hermes_exp.store.ledger import Ledger
from hermes_exp.store.rows import ledger_row
from hermes_exp.worker.result import TaskResult

TOOLS = [{"type": "function", "function": {"name": "terminal", "description": "run — a command",
                                           "parameters": {"type": "object", "properties": {}}}}]


def result(key: str, tools: list[dict[str, Any]], spent: float, attempts: int = 1) -> TaskResult:
    return TaskResult(**{"sample": 0, "key": key, "index": 0, "row": {"prompt": "p"}, "started_at": 1.0, "finished_at": 2.0,
            "state": "error", "error_class": "provider", "error": "boom", "transient": True,
            "tools": tools, "spent_usd": spent, "task_attempts": attempts})


def test_a_result_is_one_statement_that_sums_attempts_and_spend_over_dispatches(tmp_path) -> None:
    ledger = Ledger(tmp_path / "ledger.db")
    ledger.start_invocation()
    ledger.mark_running("k", 0, "p")
    statements: list[str] = []
    ledger.db.conn.set_trace_callback(statements.append)
    first = ledger_row(result("k", TOOLS, 0.25, attempts=2), [])
    ledger.record(first, 10)
    assert (first["attempts"], first["spent_usd"]) == (2, 0.25)
    statements.clear()
    second = ledger_row(result("k", TOOLS, 0.5), [])
    ledger.record(second, 10)
    assert (second["attempts"], second["spent_usd"]) == (3, 0.75)  # what the caller shows, as before
    written = {s for s in statements if s not in ("BEGIN ", "COMMIT")}
    assert len(written) == 1 and written.pop().startswith("INSERT INTO tasks")  # no read first, no tool list again
    row = next(ledger.rows())
    assert (row["attempts"], row["spent_usd"], row["tools"]) == (3, 0.75, json.dumps(TOOLS, ensure_ascii=False))
    ledger.add_spend("k", 0.125)
    third = ledger_row(result("k", TOOLS, 0.0), [])
    ledger.record(third, 10)
    assert (third["attempts"], third["spent_usd"]) == (4, 0.875)
    ledger.close()


def test_a_tool_list_of_a_failed_write_is_there_for_the_next_row_and_for_a_new_connection(tmp_path) -> None:
    ledger = Ledger(tmp_path / "ledger.db")
    ledger.start_invocation()
    ledger.mark_running("k", 0, "p")
    other = [{**TOOLS[0], "function": {**TOOLS[0]["function"], "name": "other"}}]
    bad = {**ledger_row(result("k", other, 0.1), []), "no_such_column": 1}
    with pytest.raises(sqlite3.OperationalError):
        ledger.record(bad, 10)
    bad = {**ledger_row(result("k", other, 0.1), []), "error": object()}
    with pytest.raises(sqlite3.ProgrammingError):
        ledger.record(bad, 10)
    ledger.record(ledger_row(result("k", other, 0.1), []), 10)
    assert next(ledger.rows())["tools"] == json.dumps(other, ensure_ascii=False)
    ledger.close()
    reopened = Ledger(tmp_path / "ledger.db")  # a new connection knows nothing: INSERT OR IGNORE again
    reopened.record(ledger_row(result("k", other, 0.1), []), 10)
    assert [r["tools"] for r in reopened.rows()] == [json.dumps(other, ensure_ascii=False)]
    assert reopened.db.execute("SELECT COUNT(*) FROM tool_lists").fetchone()[0] == 1
    reopened.close()


def test_a_tool_lists_json_is_made_once_per_list_object_and_never_mixed_up(monkeypatch) -> None:
    made: list[Any] = []
    plain = json.dumps

    def counting(value: Any, **kwargs: Any) -> str:
        made.append(value)
        return plain(value, **kwargs)

    monkeypatch.setattr(rows_mod.json, "dumps", counting)
    mine = [dict(TOOLS[0])]  # a list no other test has recorded
    for n in range(5):
        assert ledger_row(result(f"k{n}", mine, 0.0), [])["tools"] == plain(mine, ensure_ascii=False)
    assert sum(value is mine for value in made) == 1
    for n in range(3 * rows_mod._MAX_TOOL_TEXTS):  # fresh lists, each dropped after use: addresses come back
        tools = [{**TOOLS[0], "function": {**TOOLS[0]["function"], "name": f"tool{n}"}}]
        assert ledger_row(result("k", tools, 0.0), [])["tools"] == plain(tools, ensure_ascii=False)


def test_the_heap_of_before_the_dispatch_is_frozen_while_tasks_run_and_thawed_after(tmp_path, monkeypatch) -> None:
    """The run's start-up objects (imports, config, runtime) are left out of the cyclic collector's full
    passes while tasks run (gc.freeze), and given back to it when the dispatch ends."""
    import gc

    from test_providers import settings_for

    from hermes_exp.run import invocation as run_mod
    from hermes_exp.worker import task as worker

    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"count the words {i}"}) + "\n" for i in range(3)))
    settings = settings_for(f"run_dir={tmp_path / 'out'}", f"dataset.path={data}", "sandbox=local",
                            "distribution=terminal_only", "num_workers=2")
    frozen: list[int] = []
    real = worker.run_task

    def observed(settings: dict[str, Any], task: Any) -> dict[str, Any]:
        frozen.append(gc.get_freeze_count())
        return real(settings, task)

    monkeypatch.setattr(worker, "run_task", observed)
    assert gc.get_freeze_count() == 0
    assert run_mod.run(settings) == 0
    assert len(frozen) == 3 and min(frozen) > 1000  # the start-up's objects, tens of thousands of them
    assert gc.get_freeze_count() == 0
    assert len(list((tmp_path / "out" / "trajectories.jsonl").open())) == 3
