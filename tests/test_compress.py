"""Compression to a token budget on long trajectories made by the real CLI, with a BPE tokenizer
trained here with `tokenizers` and summaries from the mock model over HTTP."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import read_jsonl, request_count, run_cli, write_dataset

from hermes_exp.mock.server import MockServer

PROMPTS = [
    "RUN: echo start\nRUN: seq 1 400\nRUN: seq 400 800\nRUN: seq 800 1200\nRUN: echo end\nReport.",
    "RUN: echo begin\nRUN: seq 5000 5300\nRUN: seq 6000 6400\nRUN: seq 7000 7300\nRUN: echo done\nReport.",
    "Say hi",
]
TARGET = 7000
COMPRESS = ["compress.target_max_tokens=7000", "compress.summary_target_tokens=100", "compress.keep_last_turns=2"]


def train_tokenizer(path: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    corpus = ["The quick brown fox jumps over the lazy dog. " * 3, "\n".join(str(i) for i in range(2000)),
              json.dumps({"name": "terminal", "arguments": {"command": "seq 1 10"}})]
    tok.train_from_iterator(corpus * 5, trainer)
    tok.save(str(path))
    return path


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory):
    """A finished run with two long trajectories and a short one; the mock stays up for the summaries."""
    tmp = tmp_path_factory.mktemp("compress")
    with MockServer(record_path=str(tmp / "requests.jsonl")) as server:
        data = write_dataset(tmp / "p.jsonl", [{"prompt": p} for p in PROMPTS])
        # terminal and file tools only: a short row stays short (every toolset makes "Say hi" a long row)
        base = [f"dataset.path={data}", "run_name=long", f"model.base_url={server.base_url}", "distribution=terminal_only",
                f"compress.tokenizer={train_tokenizer(tmp / 'tokenizer.json')}"]
        result = run_cli(tmp, *base)
        assert result.returncode == 0, result.stderr
        yield tmp, base, server


def tokens(tokenizer: Path, row: dict) -> int:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer))
    return sum(len(tok.encode(t["value"], add_special_tokens=False).ids) for t in row["conversations"])


def assert_pairs_intact(turns: list[dict]) -> None:
    for i, turn in enumerate(turns):
        if turn["from"] == "tool":
            assert turns[i - 1]["from"] == "gpt", i
            assert turns[i - 1]["value"].count("<tool_call>") == turn["value"].count("<tool_response>"), i


def test_rows_fit_the_target_and_a_second_compress_makes_no_model_call(made) -> None:
    tmp, base, _ = made
    out = tmp / "outputs" / "long"
    original = {r["prompt_index"]: r for r in read_jsonl(out / "trajectories.jsonl")}
    assert sum(tokens(tmp / "tokenizer.json", r) > TARGET for r in original.values()) == 2
    before = request_count(tmp / "requests.jsonl")
    result = run_cli(tmp, *base, *COMPRESS, "action=compress")
    assert result.returncode == 0, result.stderr
    assert request_count(tmp / "requests.jsonl") == before + 2  # one summary per long row
    rows = read_jsonl(out / "trajectories.compressed.jsonl")
    assert len(rows) == 3
    for row in rows:
        assert tokens(tmp / "tokenizer.json", row) <= TARGET
        assert_pairs_intact(row["conversations"])
        info, source = row["compression"], original[row["prompt_index"]]
        assert info["tokens_after"] == tokens(tmp / "tokenizer.json", row)
        assert json.loads(row["tools"]) == json.loads(source["tools"])
        if info["status"] == "skipped":
            assert row["conversations"] == source["conversations"]
            continue
        assert info["status"] == "compressed" and info["turns_summarised"] >= 2
        assert info["tokens_before"] > TARGET > info["tokens_after"]
        summary = [t for t in row["conversations"] if t["value"].startswith("[CONTEXT SUMMARY]:")]
        assert len(summary) == 1 and summary[0]["from"] == "human"
        assert row["conversations"][:2][1] == source["conversations"][1]  # the head is kept
        assert row["conversations"][-2:] == source["conversations"][-2:]  # the last turns are kept
    metrics = json.loads((out / "compression_metrics.json").read_text())
    assert (metrics["compressed"], metrics["skipped_under_target"], metrics["dropped"]) == (2, 1, 0)
    assert metrics["summariser"]["api_calls"] == 2 and metrics["summariser"]["prompt_tokens"] > 0

    again = run_cli(tmp, *base, *COMPRESS, "action=compress")
    assert again.returncode == 0, again.stderr
    assert request_count(tmp / "requests.jsonl") == before + 2  # stored results: no model call
    assert read_jsonl(out / "trajectories.compressed.jsonl") == rows


@pytest.mark.parametrize("mock, status", [({"faults": {"always": "400"}}, "failed"),
                                          ({"summary_chars": 100000}, "rejected")])
def test_a_failed_or_oversize_summary_leaves_the_row_uncompressed(made, mock: dict, status: str) -> None:
    tmp, base, _ = made
    shutil.copytree(tmp / "outputs" / "long", tmp / "outputs" / status)
    original = {r["prompt_index"]: r for r in read_jsonl(tmp / "outputs" / status / "trajectories.jsonl")}
    with MockServer(**mock) as summariser:  # other settings than the first test's: no stored result applies
        args = [*base, f"run_name={status}", *COMPRESS, "compress.summary_target_tokens=120", "action=compress",
                f"+compress.model.base_url={summariser.base_url}"]
        dropped = run_cli(tmp, *args)
        kept = run_cli(tmp, *args, "compress.keep_over_limit=true")
    assert dropped.returncode == kept.returncode == (3 if status == "failed" else 0), dropped.stderr
    rows = read_jsonl(tmp / "outputs" / status / "trajectories.compressed.jsonl")
    assert len(rows) == 3
    for row in rows:
        assert "[CONTEXT SUMMARY]" not in json.dumps(row["conversations"])
        assert row["conversations"] == original[row["prompt_index"]]["conversations"]
    assert sorted(r["compression"]["status"] for r in rows) == sorted([status, status, "skipped"])
    metrics = json.loads((tmp / "outputs" / status / "compression_metrics.json").read_text())
    assert metrics[f"summary_{status}"] == 2 and metrics["written"] == 3


def test_compression_needs_a_tokenizer(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "action=compress", "compress.tokenizer=null")
    assert result.returncode == 2 and "compress.tokenizer is not set" in result.stderr
    missing = run_cli(tmp_path, "outputs.compress=true", f"compress.tokenizer={tmp_path / 'nope.json'}")
    assert missing.returncode == 2 and "no such file" in missing.stderr
    assert not (tmp_path / "outputs" / "demo" / "ledger.db").exists()


def test_the_plan_never_cuts_between_a_call_and_its_response() -> None:
    from hermes_exp.compress.plan import middle, plan

    head = [{"from": "system", "value": "s"}, {"from": "human", "value": "h"},
            {"from": "gpt", "value": "<tool_call>"}, {"from": "tool", "value": "<tool_response>"}]
    turns = head + [{"from": "gpt", "value": "<tool_call>"}, {"from": "tool", "value": "<tool_response>"}] * 6
    turns.append({"from": "gpt", "value": "done"})
    counts = [50, 10, 5, 40] + [5, 40] * 6 + [5]
    planned = 0
    for target in range(60, sum(counts) + 10, 7):
        for keep_last in range(5):
            region = plan(turns, counts, target, 8, keep_last)
            if region is None:
                continue
            planned += 1
            assert region.start >= len(head) and region.until <= len(turns) - keep_last
            assert turns[region.start]["from"] != "tool"
            assert region.until == len(turns) or turns[region.until]["from"] != "tool"
            assert region.tokens == sum(counts[region.start:region.until])
            # just enough: it fits with the summary, or it is the whole middle (the guards decide then)
            assert sum(counts) - region.tokens + 8 <= target or region.until == middle(turns, keep_last)[1]
    assert planned > 20


def test_a_fresh_compress_invocation_stores_short_rows_between_long_ones(tmp_path: Path) -> None:
    """A user's `action=compress` on a finished run, in a process of its own: rows under the target
    are stored while the rows after them are still being read (it once ended in "database table is
    locked": sqlite-utils' upsert probes with CREATE/DROP TABLE while that read was open)."""
    long_a, long_b = PROMPTS[0], PROMPTS[1]
    rows = [long_a, "Say hi", long_b, "Say hello", long_a + " Again.", "Say bye"]
    with MockServer() as server:
        data = write_dataset(tmp_path / "p.jsonl", [{"prompt": p} for p in rows])
        base = [f"dataset.path={data}", "run_name=fresh", f"model.base_url={server.base_url}",
                "distribution=terminal_only", f"compress.tokenizer={train_tokenizer(tmp_path / 'tokenizer.json')}"]
        assert run_cli(tmp_path, *base).returncode == 0
        result = run_cli(tmp_path, *base, *COMPRESS, "action=compress")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    out = read_jsonl(tmp_path / "outputs" / "fresh" / "trajectories.compressed.jsonl")
    assert sorted(r["compression"]["status"] for r in out) == ["compressed"] * 3 + ["skipped"] * 3
    metrics = json.loads((tmp_path / "outputs" / "fresh" / "compression_metrics.json").read_text())
    assert (metrics["compressed"], metrics["skipped_under_target"], metrics["written"]) == (3, 3, 6)
