"""outputs.formats=[atif]: one ATIF v1.8 trajectory per kept sample in trajectories.atif.jsonl, through the real
CLI and the mock model. Every sample of the offline demo (every toolset it uses, every verifier kind) is accepted
by the `atif` package's own models; token counts and costs are the ledger's, the reward the verifier's, logprobs
and token IDs the turn's when asked for and absent when not; a trajectory read back is the ShareGPT row's
conversation; adding the format to a finished run costs no model call (formats are not in a run's identity)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import read_jsonl, request_count, run_cli, write_dataset

from hermes_exp.store.sharegpt import gpt_value, tool_value

atif = pytest.importorskip("atif")

ATIF_FILE = "trajectories.atif.jsonl"
TOKEN_METRICS = ("logprobs", "completion_token_ids", "prompt_token_ids")


def trajectories(run_dir: Path) -> list[dict[str, Any]]:
    """Every line of the run's ATIF file, each validated by the atif package's Trajectory model."""
    docs = read_jsonl(run_dir / ATIF_FILE)
    for doc in docs:
        atif.Trajectory.model_validate(doc)
    return docs


def ledger(run_dir: Path) -> dict[str, dict[str, Any]]:
    with sqlite3.connect(run_dir / "ledger.db") as db:
        db.row_factory = sqlite3.Row
        rows = db.execute("SELECT key, state, prompt_tokens, completion_tokens, cached_tokens, cost_usd, result "
                          "FROM tasks").fetchall()
    return {r["key"]: {**dict(r), "result": json.loads(r["result"])} for r in rows}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The offline demo (`hermes-exp` with no dataset: every toolset, a row per verifier kind), asking for
    logprobs and token IDs, which the mock serves in vLLM's shape."""
    tmp = tmp_path_factory.mktemp("atif")
    done = run_cli(tmp, "run_name=demo_atif", "outputs.formats=[atif]", "model.logprobs=true", "model.top_logprobs=2",
                   "model.token_ids=true", "model.mock_server.usage_cost={prompt: 2.0, completion: 4.0}", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{ATIF_FILE}: 13" in done.stderr  # the summary names the file and its lines
    return tmp / "outputs" / "demo_atif"


@pytest.mark.slow
def test_every_demo_sample_is_a_valid_atif_trajectory_with_the_ledgers_figures(demo: Path) -> None:
    docs, rows = trajectories(demo), ledger(demo)
    sharegpt = read_jsonl(demo / "trajectories.jsonl")
    assert len(docs) == len(sharegpt) == 13
    assert [d["extra"]["prompt_index"] for d in docs] == [r["prompt_index"] for r in sharegpt]
    tools_used = set()
    for doc in docs:
        row = rows[doc["session_id"]]
        assert doc["schema_version"] == "ATIF-v1.8" and row["state"] == "done"
        usage = row["result"]["usage"]
        final = doc["final_metrics"]
        assert (final["total_prompt_tokens"], final["total_completion_tokens"], final["total_cached_tokens"]) == (
            row["prompt_tokens"], row["completion_tokens"], row["cached_tokens"])
        assert final["total_cost_usd"] == pytest.approx(row["cost_usd"])
        agent = [s for s in doc["steps"] if s["source"] == "agent"]
        assert len(agent) == len(usage) == row["result"]["api_calls"] and final["total_steps"] == len(doc["steps"])
        for step, call in zip(agent, usage):
            assert step["metrics"]["prompt_tokens"] == call["prompt_tokens"]
            assert step["metrics"]["completion_tokens"] == call["completion_tokens"]
            assert step["metrics"]["cost_usd"] == call["cost_usd"] > 0  # the mock says what each call cost
            tools_used.update(c["function_name"] for c in step.get("tool_calls", []))
        offered = {t["function"]["name"] for t in doc["agent"]["tool_definitions"]}
        assert offered == set(row["result"]["tools_offered"])
    # the demo's tools, from every toolset it draws, are in the trajectories
    assert {"terminal", "write_file", "web_search", "vision_analyze", "image_generate", "browser_navigate"} <= tools_used


@pytest.mark.slow
def test_verified_samples_carry_the_reward_and_each_turn_its_logprobs_and_token_ids(demo: Path) -> None:
    docs, rows = trajectories(demo), ledger(demo)
    by_row = {(d["extra"]["prompt_index"]): d for d in docs}
    sharegpt = {r["prompt_index"]: r for r in read_jsonl(demo / "trajectories.jsonl")}
    verified = [i for i, r in sharegpt.items() if r["metadata"]["category"] == "verified"]
    assert len(verified) == 5
    for index in verified:
        extra = by_row[index]["extra"]
        assert (extra["reward"], extra["passed"]) == (sharegpt[index]["reward"], sharegpt[index]["passed"])
        assert extra["passed"] is not None
    assert [by_row[i]["extra"]["passed"] for i in verified] == [True, True, False, True, True]
    for doc in docs:
        saved = [m for m in rows[doc["session_id"]]["result"]["messages"] if m["role"] == "assistant"]
        for step, message in zip([s for s in doc["steps"] if s["source"] == "agent"], saved, strict=True):
            metrics = step["metrics"]
            assert metrics["logprobs"] == [t["logprob"] for t in message["logprobs"]["content"]]
            assert metrics["extra"]["logprob_tokens"] == [t["token"] for t in message["logprobs"]["content"]]
            assert len(metrics["extra"]["top_logprobs"][0]) == 2
            assert metrics["completion_token_ids"] == message["token_ids"]
            assert len(metrics["completion_token_ids"]) == len(metrics["logprobs"])
            assert metrics["prompt_token_ids"] == message["prompt_token_ids"]


def as_sharegpt(doc: dict[str, Any]) -> list[dict[str, str]]:
    """An ATIF trajectory read back into ShareGPT turns: its steps as OpenAI messages, rendered by the rules
    the ShareGPT export uses (store/sharegpt.py)."""
    turns: list[dict[str, str]] = []
    for step in doc["steps"]:
        if step["source"] != "agent":
            turns.append({"from": "system" if step["source"] == "system" else "human", "value": step["message"]})
            continue
        calls = [{"id": c["tool_call_id"], "function": {"name": c["function_name"], "arguments": json.dumps(c["arguments"])}}
                 for c in step.get("tool_calls", [])]
        turns.append({"from": "gpt", "value": gpt_value({"content": step["message"], "tool_calls": calls,
                                                          "reasoning_content": step.get("reasoning_content")})})
        results = (step.get("observation") or {}).get("results", [])
        if results:
            replies = [{"tool_call_id": r["source_call_id"], "name": r["extra"]["name"], "content": r["content"]}
                       for r in results]
            turns.append({"from": "tool", "value": tool_value(replies)})
    return turns


@pytest.mark.slow
def test_a_trajectory_read_back_is_the_sharegpt_rows_conversation(demo: Path) -> None:
    docs = {d["extra"]["prompt_index"]: d for d in trajectories(demo)}
    for row in read_jsonl(demo / "trajectories.jsonl"):
        turns = as_sharegpt(docs[row["prompt_index"]])
        # ShareGPT's system turn is Hermes's tool prompt, then the system prompt sent (ATIF's system step)
        assert turns[0]["from"] == "system" and row["conversations"][0]["value"].endswith("\n\n" + turns[0]["value"])
        assert turns[1:] == row["conversations"][1:]
        assert len(turns) > 3


def test_added_to_a_finished_run_no_model_call_and_no_token_data_unless_asked(tmp_path: Path, mock_server) -> None:
    """A run made without the format: adding it resumes (same identity), calls no model, and its turns have
    no logprobs nor token IDs (absent, not empty); dropping it again removes the file."""
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "RUN: echo hi\nSay hi"}, {"prompt": "Say bye"}])
    args = [f"dataset.path={data}", "run_name=plain", f"model.base_url={mock_server.base_url}",
            "distribution=terminal_only"]
    first = run_cli(tmp_path, *args)
    assert first.returncode == 0, first.stderr
    out, calls = tmp_path / "outputs" / "plain", request_count(tmp_path / "requests.jsonl")
    assert not (out / ATIF_FILE).exists()
    added = run_cli(tmp_path, *args, "outputs.formats=[sharegpt,atif]")
    assert added.returncode == 0, added.stderr
    assert request_count(tmp_path / "requests.jsonl") == calls and "0 planned now" in added.stderr
    docs = trajectories(out)
    assert len(docs) == 2
    agent = [s for d in docs for s in d["steps"] if s["source"] == "agent"]
    calls_made = sum(r["result"]["api_calls"] for r in ledger(out).values())
    assert len(agent) == calls_made and all(s["llm_call_count"] == 1 and s["model_name"] for s in agent)
    # the mock has no price and says no cost: unknown, so absent (never a cost of 0)
    assert not any("cost_usd" in s["metrics"] for s in agent) and not any("total_cost_usd" in d["final_metrics"] for d in docs)
    assert not any(k in s["metrics"] for s in agent for k in TOKEN_METRICS)
    assert not any(k in s["metrics"].get("extra", {}) for s in agent for k in ("logprob_tokens", "top_logprobs"))
    call = [c for s in agent for c in s.get("tool_calls", [])][0]
    assert call["function_name"] == "terminal" and call["arguments"] == {"command": "echo hi"}
    result = [r for s in agent for r in s.get("observation", {}).get("results", [])][0]
    assert result["source_call_id"] == call["tool_call_id"] and json.loads(result["content"])["output"] == "hi\n"
    assert result["extra"]["failed"] is False and result["extra"]["name"] == "terminal"
    assert all(d["extra"]["reward"] is None and "passed" in d["extra"] for d in docs)
    dropped = run_cli(tmp_path, *args, "action=export")
    assert dropped.returncode == 0, dropped.stderr
    assert not (out / ATIF_FILE).exists()
