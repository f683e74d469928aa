"""Cost and budget through the real CLI, a real mock server and the real ledger: what statistics.json says
was spent is what the tasks cost, and the budget stops a run within one call's worst case of its limit."""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import request_count, run_cli, write_dataset
from test_providers import settings_for

from hermes_exp.model.checks import check_config
from hermes_exp.money.budget import Budget
from hermes_exp.errors import BudgetExhausted, ConfigError
from hermes_exp.mock.server import MockServer

# USD per 1M tokens: high, so that a mock conversation costs whole cents and the budget bites quickly.
PRICED = ["model.pricing.prompt=1000", "model.pricing.completion=1000", "model.sampling.max_tokens=400"]


def ledger_rows(run_dir: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(run_dir / "ledger.db") as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM tasks")]


def stats_of(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "statistics.json").read_text())


def test_budget_stops_within_one_call_and_a_resume_keeps_counting(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"Budget task {i}"} for i in range(20)])
    requests = tmp_path / "requests.jsonl"
    with MockServer(record_path=str(requests)) as server:
        # terminal only: the schemas of every toolset would make one call's worst case pass the $3 limit alone
        def run(limit: float):
            return run_cli(tmp_path, f"model.base_url={server.base_url}", f"dataset.path={data}", "run_name=b",
                           "num_workers=4", "max_turns=4", "filters=none", "distribution=terminal_only", *PRICED,
                           f"budget.max_cost_usd={limit}")

        first = run(3.0)
        assert first.returncode == 4, first.stderr
        assert "budget reached" in first.stderr and "fix: raise it, e.g. budget.max_cost_usd=6" in first.stderr
        worst = float(re.search(r"could cost up to \$([0-9.]+)", first.stderr).group(1))
        spent = stats_of(tmp_path / "outputs" / "b")["spent_usd"]
        assert 3.0 - worst < spent <= 3.0
        calls = request_count(requests)
        assert 0 < calls < 80  # the dataset would need 80

        same = run(3.0)  # the same budget again: the ledger's spend counts, so not one more call
        assert same.returncode == 4 and request_count(requests) == calls
        assert stats_of(tmp_path / "outputs" / "b")["spent_usd"] == pytest.approx(spent)

        raised = run(100.0)
    assert raised.returncode == 0, raised.stderr
    stats = stats_of(tmp_path / "outputs" / "b")
    assert stats["kept"] == 20 and stats["failed"] == 0
    assert spent < stats["spent_usd"] <= 100.0 and stats["spent_usd"] >= stats["cost_usd"]
    rows = ledger_rows(tmp_path / "outputs" / "b")
    assert stats["spent_usd"] == pytest.approx(sum(r["spent_usd"] for r in rows))


def _calls(result: dict) -> list[dict]:
    """A task's model calls: its agent turns and its tools' own (vision_analyze), all in its cost."""
    return result["usage"] + result.get("tool_model_calls", [])


def test_statistics_cost_is_the_sum_over_tasks_and_provider_cost_wins(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"Cost task {i}"} for i in range(6)])
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=c", "filters=none", *PRICED,
                     "model.mock_server.usage_cost={prompt: 2.0, completion: 4.0}",
                     "model.mock_server.provider_name=MockUpstream")
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "outputs" / "c"
    stats, rows = stats_of(run_dir), ledger_rows(run_dir)
    calls = [u for r in rows for u in _calls(json.loads(r["result"]))]
    assert all(u["cost_source"] == "provider" and u["cost_usd"] == u["cost"] for u in calls)
    assert all(u["served_by"] == {"model": "mock", "provider": "MockUpstream"} for u in calls)
    for row in rows:
        assert row["cost_usd"] == pytest.approx(sum(u["cost"] for u in _calls(json.loads(row["result"]))))
    assert stats["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in rows)) == pytest.approx(stats["spent_usd"])
    assert stats["cost_usd"] == pytest.approx(sum((u["prompt_tokens"] * 2 + u["completion_tokens"] * 4) / 1e6
                                                  for u in calls))
    assert stats["tokens"]["cached_tokens"] == sum(r["cached_tokens"] for r in rows) > 0
    assert stats["served_by"] == {"MockUpstream": stats["api_calls"]}


def test_priced_cost_when_the_provider_reports_none(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "Priced task"}])
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=p", "filters=none", "model.pricing.prompt=1.5",
                     "model.pricing.completion=6")
    assert result.returncode == 0, result.stderr
    [row] = ledger_rows(tmp_path / "outputs" / "p")
    usage = _calls(json.loads(row["result"]))
    assert row["cost_usd"] == pytest.approx(sum(u["prompt_tokens"] * 1.5 + u["completion_tokens"] * 6
                                                for u in usage) / 1e6)
    assert {u["cost_source"] for u in usage} == {"pricing"}


def test_task_cost_cap_ends_the_task_as_a_budget_error(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "LOOP"}, {"prompt": "again\nLOOP"}])
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=t", "filters=none", "max_turns=20", *PRICED,
                     "distribution=terminal_only", "distribution.toolsets.file=0",  # fewer tool schemas: a first
                     # call's worst case must fit under the cap
                     "budget.max_task_cost_usd=1.5")
    assert result.returncode == 3, result.stderr  # task errors, not a stopped run
    stats = stats_of(tmp_path / "outputs" / "t")
    assert stats["errors"] == {"budget": 2}
    for row in ledger_rows(tmp_path / "outputs" / "t"):
        assert "task cost cap reached" in row["error"] and 0 < row["spent_usd"] <= 1.5


def test_a_budget_needs_prices() -> None:
    with pytest.raises(ConfigError, match="a budget is set but model.pricing is null") as info:
        check_config(settings_for("budget.max_cost_usd=5"))
    assert "model.pricing.prompt" in info.value.hint
    with pytest.raises(ConfigError, match="budget.max_cost_usd=-1 must be a positive number"):
        check_config(settings_for("budget.max_cost_usd=-1"))


def test_budget_waits_for_calls_in_flight_before_refusing() -> None:
    budget = Budget(limit=1.0)
    first = budget.reserve(0.6)
    got: list[float] = []
    waiter = threading.Thread(target=lambda: got.append(budget.reserve(0.6)))
    waiter.start()
    waiter.join(0.1)
    assert waiter.is_alive()  # 0.6 + 0.6 could pass the limit while the first call is in flight
    budget.settle(first, 0.1)  # it cost less than its worst case: room for the second
    waiter.join(5)
    assert got == [0.6]
    budget.settle(0.6, 0.5)
    with pytest.raises(BudgetExhausted, match=r"\$0.600000 spent of budget.max_cost_usd=1.0"):
        budget.reserve(0.5)
    assert budget.spent == pytest.approx(0.6) and budget.spent <= budget.limit
