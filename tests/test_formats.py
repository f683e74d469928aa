"""Exports that load everywhere, and the ledger's SQL views, on runs made by the real CLI.

Two runs with different toolset distributions (terminal only, all tools) must load together with
Hugging Face `datasets` into one schema, in every format; the views must agree with statistics.json."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sqlite_utils

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # local files only: never reach the Hub
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from conftest import known_tools  # noqa: E402

from hermes_exp.errors import ConfigError  # noqa: E402
from hermes_exp.store.formats import OPENAI_FILE, PARQUET_FILE, chosen_formats, write_parquet  # noqa: E402
from hermes_exp.store.ledger import Ledger  # noqa: E402
from hermes_exp.store.views import VIEWS, create_views  # noqa: E402

DEMO = Path(__file__).resolve().parents[1] / "hermes_exp" / "data" / "demo_prompts.jsonl"
MINIMAL = ("run_name=minimal", "distribution=terminal_only", "distribution.toolsets.file=0")


def run_cli(tmp: Path, *overrides: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "hermes_exp.cli", f"dataset.path={DEMO}", *overrides],
                          cwd=tmp, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """A terminal-only run and an all-tools run that drops reasoning (so some tasks are filtered)."""
    tmp = tmp_path_factory.mktemp("runs")
    formats = "outputs.formats=[sharegpt,openai]"  # the OpenAI file as a run writes it
    run_cli(tmp, *MINIMAL, formats)
    run_cli(tmp, "run_name=default", "distribution=default", "model.mock_server.no_reasoning_rate=0.4",
            "model.mock_server.bad_tool_rate=0.3", formats)
    return [tmp / "outputs" / "minimal", tmp / "outputs" / "default"]


def load_json(files: list[Path], cache: Path, builder: str = "json"):
    import datasets

    return datasets.load_dataset(builder, data_files=[str(f) for f in files], split="train", cache_dir=str(cache))


def kept(run: Path) -> int:
    return json.loads((run / "statistics.json").read_text())["kept"]


def test_sharegpt_from_two_distributions_loads_as_one_dataset(runs: list[Path], tmp_path: Path) -> None:
    ds = load_json([r / "trajectories.jsonl" for r in runs], tmp_path)
    assert len(ds) == sum(kept(r) for r in runs)
    assert set(ds.features["tool_stats"]) == set(known_tools())
    assert {t["from"] for row in ds for t in row["conversations"]} == {"system", "human", "gpt", "tool"}


def test_openai_messages_are_exactly_as_sent_and_load_together(runs: list[Path], tmp_path: Path) -> None:
    for run in runs:
        ledger = Ledger(run / "ledger.db")
        try:
            raw = {r["prompt_index"]: json.loads(r["result"])["messages"] for r in ledger.rows(("done",))}
        finally:
            ledger.close()
        for line in (run / OPENAI_FILE).read_text().splitlines():
            record = json.loads(line)
            sent = raw[record["prompt_index"]]
            assert len(record["messages"]) == len(sent)
            for ours, theirs in zip(record["messages"], sent):
                for key in ("role", "content", "tool_calls", "tool_call_id"):
                    assert ours[key] == theirs.get(key), key
            assert [t["function"]["name"] for t in json.loads(record["tools"])]  # the schemas offered
    ds = load_json([r / OPENAI_FILE for r in runs], tmp_path)
    assert len(ds) == sum(kept(r) for r in runs)
    roles = {m["role"] for row in ds for m in row["messages"]}
    assert roles == {"system", "user", "assistant", "tool"}
    assert set(ds[0]["messages"][0]) == {"role", "content", "reasoning_content", "tool_calls",
                                               "tool_call_id", "name"}


def test_parquet_export_loads_with_pyarrow_and_datasets(runs: list[Path], tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    for run in runs:
        write_parquet(run)
        table = pq.read_table(run / PARQUET_FILE)
        lines = (run / "trajectories.jsonl").read_text().splitlines()
        assert table.num_rows == len(lines) == kept(run)
        assert table.slice(0, 1).to_pylist()[0]["conversations"] == json.loads(lines[0])["conversations"]
    ds = load_json([r / PARQUET_FILE for r in runs], tmp_path, builder="parquet")
    assert len(ds) == sum(kept(r) for r in runs)


def test_formats_are_chosen_by_config(runs: list[Path], tmp_path: Path) -> None:
    """action=export writes the formats the config chooses and removes the ones it no longer does."""
    run = tmp_path / "outputs" / "minimal"
    shutil.copytree(runs[0], run)
    assert (run / OPENAI_FILE).is_file()  # the run chose it
    run_cli(tmp_path, *MINIMAL, "action=export", "outputs.formats=[sharegpt,parquet]")
    assert (run / PARQUET_FILE).is_file() and not (run / OPENAI_FILE).exists()
    run_cli(tmp_path, *MINIMAL, "action=export")  # default: ShareGPT only
    assert not (run / PARQUET_FILE).exists() and not (run / OPENAI_FILE).exists()
    assert (run / "trajectories.jsonl").read_text().count("\n") == kept(run)
    with pytest.raises(ConfigError, match="outputs.formats.*'xml'") as err:
        chosen_formats({"outputs": {"formats": ["sharegpt", "xml"]}})
    assert "sharegpt, openai, parquet" in str(err.value)


def test_views_agree_with_statistics(runs: list[Path], tmp_path: Path) -> None:
    run = runs[1]
    copy = tmp_path / "ledger.db"
    shutil.copy(run / "ledger.db", copy)
    db = sqlite_utils.Database(copy)
    assert create_views(db) == list(VIEWS) and create_views(db) == list(VIEWS)  # idempotent
    assert set(VIEWS) <= set(db.view_names())
    stats = json.loads((run / "statistics.json").read_text())

    summary = list(db.query("SELECT * FROM task_summary"))
    assert len(summary) == stats["total_prompts"]
    assert sum(r["api_calls"] for r in summary) == stats["api_calls"]
    assert sum(r["total_tokens"] for r in summary) == stats["tokens"]["prompt_tokens"] + stats["tokens"]["completion_tokens"]
    done = [r for r in summary if r["state"] == "done"]
    assert sum(r["turns"] for r in done) == stats["reasoning_statistics"]["total_assistant_turns"]
    assert sum(r["reasoning_turns"] for r in done) == stats["reasoning_statistics"]["turns_with_reasoning"]
    filtered = {r["why"]: r["tasks"] for r in db.query("SELECT * FROM outcomes WHERE state = 'filtered'")}
    assert filtered == stats["discarded"] and filtered  # this run has filtered tasks

    by_tool = {r["tool"]: r for r in db.query("SELECT * FROM tool_calls_by_tool")}
    for tool, s in stats["tool_statistics"].items():
        if s["count"]:
            assert by_tool[tool]["calls_in_kept"] == s["count"]
    kept_calls = db.execute("SELECT tool, SUM(failed <> 0) FROM tool_calls WHERE state = 'done' GROUP BY tool")
    for tool, failures in kept_calls.fetchall():
        assert failures == stats["tool_statistics"].get(tool, {"failure": failures})["failure"]
    assert db.execute("SELECT COUNT(*) FROM messages WHERE role = 'tool'").fetchone()[0] == \
        sum(r["tool_calls"] for r in summary)
