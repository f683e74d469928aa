"""Error class `model`: a reply that cannot be an assistant turn (the mock's "garbled" fault: tool calls as raw
text) fails its sample as `model`, keeps the calls already made, and is retried only when asked."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from conftest import request_count, run_cli, write_dataset

from hermes_exp.mock.server import MockServer


def test_an_unusable_reply_is_error_class_model_and_is_retried_only_when_asked(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "RUN: echo one\nReport."}])
    record = tmp_path / "requests.jsonl"
    out = tmp_path / "outputs" / "garbled"
    with MockServer(record_path=str(record), faults={"script": ["ok", "garbled"]}) as server:
        args = [f"dataset.path={data}", "run_name=garbled", f"model.base_url={server.base_url}", "filters=none",
                "distribution=terminal_only"]
        first = run_cli(tmp_path, *args)
        assert first.returncode == 3, first.stderr
        assert "some tasks failed (model)" in first.stderr and "Traceback" not in first.stderr
        with sqlite3.connect(out / "ledger.db") as db:
            state, error_class, error, api_calls, result = db.execute(
                "SELECT state, error_class, error, api_calls, result FROM tasks").fetchone()
        assert (state, error_class, api_calls) == ("error", "model", 2)
        assert "tool_calls are not a list of call objects" in error
        result = json.loads(result)
        assert [m["role"] for m in result["messages"]][-2:] == ["assistant", "tool"]  # the first turn is kept
        assert len(result["usage"]) == 2  # both calls were paid for
        assert json.loads((out / "statistics.json").read_text())["errors"] == {"model": 1}

        sent = request_count(record)
        again = run_cli(tmp_path, *args)
        assert again.returncode == 3, again.stderr
        assert request_count(record) == sent  # not transient, not in resume.retry_errors by default

        retried = run_cli(tmp_path, *args, "resume.retry_errors=[provider,sandbox,model]")
        assert retried.returncode == 0, retried.stderr
    with sqlite3.connect(out / "ledger.db") as db:
        assert db.execute("SELECT state, error_class FROM tasks").fetchone() == ("done", None)
