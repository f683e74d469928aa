"""The whole runner through the real CLI, a real mock HTTP server and real SQLite."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import agent_request_count, known_tools, read_jsonl, request_count, run_cli, write_dataset

KNOWN_TOOLS = known_tools()

ROW_KEYS = {"prompt_index", "conversations", "tools", "metadata", "completed", "partial", "api_calls",
            "toolsets_used", "tool_stats", "tool_error_counts", "sample", "reward", "passed"}


def _check_row(row: dict) -> None:
    assert set(row) == ROW_KEYS
    assert set(row["tool_stats"]) == set(KNOWN_TOOLS)
    assert set(row["tool_error_counts"]) == set(KNOWN_TOOLS)
    for name, stat in row["tool_stats"].items():
        assert set(stat) == {"count", "success", "failure"}
        assert stat["count"] == stat["success"] + stat["failure"]
        assert row["tool_error_counts"][name] == stat["failure"]
    turns = row["conversations"]
    assert [t["from"] for t in turns[:2]] == ["system", "human"]
    offered = [t["function"]["name"] for t in json.loads(row["tools"])]
    assert offered and f'<tools>\n[{{"name": "{offered[0]}"' in turns[0]["value"]  # Hermes's tool signatures
    assert all(set(t) == {"from", "value"} and t["from"] in {"system", "human", "gpt", "tool"} for t in turns)
    gpt = [t["value"] for t in turns if t["from"] == "gpt"]
    assert len(gpt) == row["api_calls"]
    assert all(v.startswith("<think>\n") for v in gpt)
    for turn in turns:
        if turn["from"] == "tool":
            for block in turn["value"].split("\n<tool_response>\n"):
                body = json.loads(block.removeprefix("<tool_response>\n").removesuffix("\n</tool_response>"))
                assert set(body) == {"tool_call_id", "name", "content"}
    assert set(row["metadata"]) >= {"batch_num", "timestamp", "model"}


def test_fifty_prompts_eight_workers_then_resume_makes_no_requests(tmp_path: Path, mock_server) -> None:
    rows = [{"prompt": f"Task number {i}: count words", "topic": f"t{i % 3}"} for i in range(50)]
    data = write_dataset(tmp_path / "prompts.jsonl", rows)
    args = [f"dataset.path={data}", "run_name=e2e", "num_workers=8", "batch_size=7",
            f"model.base_url={mock_server.base_url}"]
    first = run_cli(tmp_path, *args)
    assert first.returncode == 0, first.stderr
    out = tmp_path / "outputs" / "e2e"
    trajectories = read_jsonl(out / "trajectories.jsonl")
    assert len(trajectories) == 50
    assert sorted(t["prompt_index"] for t in trajectories) == list(range(50))
    for row in trajectories:
        _check_row(row)
        assert row["metadata"]["topic"] == f"t{row['prompt_index'] % 3}"
        assert row["metadata"]["model"] == "mock"
        assert row["completed"] is True and row["partial"] is False
        assert row["conversations"][1]["value"] == f"Task number {row['prompt_index']}: count words"
    batches = sorted(out.glob("batch_*.jsonl"))
    assert len(batches) == 8  # ceil(50 / 7)
    assert sum(len(read_jsonl(b)) for b in batches) == 50
    stats = json.loads((out / "statistics.json").read_text())
    assert stats["kept"] == 50 and stats["total_prompts"] == 50 and stats["failed"] == 0
    assert stats["api_calls"] == sum(t["api_calls"] for t in trajectories) == agent_request_count(tmp_path / "requests.jsonl")
    for tool in KNOWN_TOOLS:
        assert stats["tool_statistics"][tool]["count"] == sum(t["tool_stats"][tool]["count"] for t in trajectories)
    assert stats["reasoning_statistics"]["turns_with_reasoning"] == sum(t["api_calls"] for t in trajectories)
    assert stats["total_batches"] == 8

    before = {p.name: p.read_bytes() for p in out.glob("*.json*")}
    calls = request_count(tmp_path / "requests.jsonl")
    second = run_cli(tmp_path, *args)
    assert second.returncode == 0, second.stderr
    assert request_count(tmp_path / "requests.jsonl") == calls
    assert {p.name: p.read_bytes() for p in out.glob("*.json*")} == before
    assert "nothing to run" in second.stderr


def test_isolation_files_and_secrets(tmp_path: Path, mock_server) -> None:
    secret = "sk-test-THIS-MUST-NOT-LEAK-12345"
    rows = [{"prompt": f"RUN: ls -A\nRUN: echo mine > own_{i}.txt\nRUN: env\nRUN: ls -A"} for i in range(12)]
    data = write_dataset(tmp_path / "p.jsonl", rows)
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=iso", "num_workers=6", "filters=none",
                     f"model.base_url={mock_server.base_url}", "provider.api_key_env=HX_TEST_API_KEY",
                     env={"HX_TEST_API_KEY": secret, "HX_OTHER_SECRET": secret})
    assert result.returncode == 0, result.stderr
    out = tmp_path / "outputs" / "iso"
    for row in read_jsonl(out / "trajectories.jsonl"):
        tools = [json.loads(t["value"].split("\n", 1)[1].rsplit("\n", 1)[0])["content"]
                 for t in row["conversations"] if t["from"] == "tool"]
        assert tools[0]["output"] == ""  # a fresh, empty directory: nobody else's files
        assert tools[3]["output"].split() == [f"own_{row['prompt_index']}.txt"]
        assert "HX_" not in tools[2]["output"] and secret not in tools[2]["output"]
    for path in [*out.rglob("*"), tmp_path / "requests.jsonl"]:
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    assert secret not in result.stdout + result.stderr


def test_max_turns_without_answer_is_incomplete(tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "LOOP"}])
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=loop", "max_turns=3", "filters=none",
                     f"model.base_url={mock_server.base_url}")
    assert result.returncode == 0, result.stderr
    [row] = read_jsonl(tmp_path / "outputs" / "loop" / "trajectories.jsonl")
    assert row["completed"] is False and row["api_calls"] == 3
    assert row["tool_stats"]["terminal"]["count"] == 3


def test_filters_drop_and_record_reasons(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"p{i}"} for i in range(6)])
    for knob, reason in (("bad_tool_rate", "hallucinated_tools"), ("no_reasoning_rate", "no_reasoning")):
        run_name = f"f_{knob}"
        result = run_cli(tmp_path, f"dataset.path={data}", f"run_name={run_name}", f"model.mock_server.{knob}=1.0",
                         "distribution=terminal_only")  # the filters, not the toolsets, are under test
        assert result.returncode == 0, result.stderr
        out = tmp_path / "outputs" / run_name
        assert (out / "trajectories.jsonl").read_text() == ""
        stats = json.loads((out / "statistics.json").read_text())
        assert stats["filtered"] == 6 and stats["discarded"] == {reason: 6}
        assert f"{reason}: 6" in result.stderr
    kept = run_cli(tmp_path, f"dataset.path={data}", "run_name=f_none", "filters=none",
                   "model.mock_server.bad_tool_rate=1.0", "distribution=terminal_only")
    rows = read_jsonl(tmp_path / "outputs" / "f_none" / "trajectories.jsonl")
    assert kept.returncode == 0 and len(rows) == 6
    # The hallucinated call is kept verbatim and answered with an error naming the valid tools.
    assert all('"name": "nonexistent_tool"' in r["conversations"][2]["value"] for r in rows)
    for r in rows:
        offered = ", ".join(t["function"]["name"] for t in json.loads(r["tools"]))
        assert f"the tools you can call are: {offered}" in r["conversations"][3]["value"]


def test_reproduce_from_saved_snapshot(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"Reproduce me {i}"} for i in range(5)])
    first = run_cli(tmp_path, f"dataset.path={data}", "run_name=orig", "distribution=balanced", "seed=7",
                    "provider.api_key_env=HX_REPRO_KEY", env={"HX_REPRO_KEY": "sk-secret-repro-999"})
    assert first.returncode == 0, first.stderr
    snapshot = tmp_path / "outputs" / "orig" / ".hydra"
    assert "sk-secret-repro-999" not in "".join(p.read_text() for p in snapshot.iterdir())
    again = run_cli(tmp_path, "--config-path", str(snapshot), "--config-name", "config", "run_name=copy",
                    env={"HX_REPRO_KEY": "sk-secret-repro-999"})
    assert again.returncode == 0, again.stderr
    a = read_jsonl(tmp_path / "outputs" / "orig" / "trajectories.jsonl")
    b = read_jsonl(tmp_path / "outputs" / "copy" / "trajectories.jsonl")
    # Each run starts its own mock server: only its port (in the web tools' URLs) differs.
    same = lambda rows: re.sub(r"127\.0\.0\.1:\d+", "HOST", json.dumps([r["conversations"] for r in rows]))  # noqa: E731
    assert same(a) == same(b)
    assert [r["toolsets_used"] for r in a] == [r["toolsets_used"] for r in b]


def test_demo_runs_with_no_arguments(tmp_path: Path) -> None:
    result = run_cli(tmp_path)
    assert result.returncode == 0, result.stderr
    rows = read_jsonl(tmp_path / "outputs" / "demo" / "trajectories.jsonl")
    assert len(rows) == 13
    # The demo carries verifiable tasks, one per verifier kind (per-row verifiers): the mock fails one.
    assert [r["passed"] for r in rows if r["metadata"]["category"] == "verified"] == [True, True, False, True, True]
    assert "trajectories:" in result.stderr


def test_ephemeral_prompt_and_prefill_are_sent_but_never_saved(tmp_path: Path, mock_server) -> None:
    prefill = tmp_path / "prefill.json"
    prefill.write_text(json.dumps([{"role": "user", "content": "PREFILL-QUESTION"},
                                   {"role": "assistant", "content": "PREFILL-ANSWER"}]))
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "Hello there"}])
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=eph", f"model.base_url={mock_server.base_url}",
                     "system_prompt=SAVED-SYSTEM", "ephemeral_system_prompt=EPHEMERAL-PART",
                     f"prefill_messages={prefill}")
    assert result.returncode == 0, result.stderr
    bodies = [json.loads(line)["body"] for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    turns = [b for b in bodies if "tools" in b]  # agent turns; vision_analyze's own call has no system prompt
    assert turns and len(turns) < len(bodies)
    for body in turns:
        assert body["messages"][0] == {"role": "system", "content": "SAVED-SYSTEM\n\nEPHEMERAL-PART"}
        assert [m["content"] for m in body["messages"][1:4]] == ["PREFILL-QUESTION", "PREFILL-ANSWER", "Hello there"]
    out = tmp_path / "outputs" / "eph"
    [row] = read_jsonl(out / "trajectories.jsonl")
    assert row["conversations"][0]["value"].endswith("</tool_call>\n\nSAVED-SYSTEM")  # after Hermes's turn
    assert row["conversations"][1] == {"from": "human", "value": "Hello there"}
    for path in [*out.glob("*.json*"), *(out / ".hydra").iterdir()]:  # the config snapshot included
        text = path.read_text()
        assert "EPHEMERAL-PART" not in text and "PREFILL-" not in text, path
    assert "ephemeral_system_prompt was set" in (out / ".hydra" / "config.yaml").read_text()
    for path in out.glob("ledger.db*"):  # the ledger keeps their digest (the identity), never their text
        data = path.read_bytes()
        assert b"EPHEMERAL-PART" not in data and b"PREFILL-" not in data, path
