"""Hostile data at the CLI: bytes that are not UTF-8, odd line ends, rows nested too deep, numeric run
names, damaged or missing ledgers, shrinking exports, a dataset rewritten mid-run, a full disk."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import agent_bodies, done_rows, read_jsonl, run_cli, user_prompt, write_dataset

from hermes_exp.mock.server import MockServer


def _clean_failure(result: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


def test_invalid_utf8_names_line_and_byte_and_can_be_skipped(tmp_path: Path) -> None:
    first = b'{"prompt": "fine one"}\n'
    bad = b'{"prompt": "caf\xff"}\n'
    data = tmp_path / "p.jsonl"
    data.write_bytes(first + b"\n" + bad + b'{"prompt": "fine two"}\n')
    column = bad.index(b"\xff")
    offset = len(first) + 1 + column
    refused = run_cli(tmp_path, f"dataset.path={data}", "run_name=utf")
    _clean_failure(refused, 2, f"{data}:3: not UTF-8 text (invalid start byte at byte {offset} of the file, "
                               f"column {column + 1} of the line)", "dataset.skip_invalid=true")
    skipped = run_cli(tmp_path, f"dataset.path={data}", "run_name=utf", "dataset.skip_invalid=true")
    assert skipped.returncode == 0, skipped.stderr
    assert "skipping 1 invalid line(s)" in skipped.stderr
    rows = read_jsonl(tmp_path / "outputs" / "utf" / "trajectories.jsonl")
    assert sorted(r["prompt_index"] for r in rows) == [0, 3]


def test_a_lone_carriage_return_does_not_split_a_line(tmp_path: Path) -> None:
    data = tmp_path / "p.jsonl"
    data.write_bytes(b'{"prompt": "first",\r"topic": "cr"}\n{"prompt": "second"}\r\n')
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=cr")
    assert result.returncode == 0, result.stderr
    rows = read_jsonl(tmp_path / "outputs" / "cr" / "trajectories.jsonl")
    assert [(r["prompt_index"], r["conversations"][1]["value"]) for r in rows] == [(0, "first"), (1, "second")]
    assert rows[0]["metadata"]["topic"] == "cr"


def test_rows_nested_too_deep_are_invalid_lines_not_a_traceback(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [
        {"prompt": "shallow"},
        '{"prompt": "deep", "x": ' + "[" * 100_000 + "]" * 100_000 + "}",  # past the parser's recursion
        '{"prompt": "deep", "x": ' + "[" * 200 + "]" * 200 + "}",  # parses, but too deep to keep
    ])
    refused = run_cli(tmp_path, f"dataset.path={data}", "run_name=deep")
    _clean_failure(refused, 2, f"{data}:2: nested too deeply", f"{data}:3: nested 201 levels deep")
    skipped = run_cli(tmp_path, f"dataset.path={data}", "run_name=deep", "dataset.skip_invalid=true")
    assert skipped.returncode == 0, skipped.stderr
    assert len(read_jsonl(tmp_path / "outputs" / "deep" / "trajectories.jsonl")) == 1


def test_a_numeric_run_name_is_a_name(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "numbered"}])
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=2024")
    assert result.returncode == 0, result.stderr
    assert len(read_jsonl(tmp_path / "outputs" / "2024" / "trajectories.jsonl")) == 1


@pytest.mark.parametrize("damage", ["empty", "garbage", "text", "deleted"])
def test_a_damaged_or_missing_ledger_is_refused_and_outputs_kept(tmp_path: Path, damage: str) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"Keep {i}"} for i in range(4)])
    args = [f"dataset.path={data}", "run_name=dmg"]
    assert run_cli(tmp_path, *args).returncode == 0
    out = tmp_path / "outputs" / "dmg"
    before = (out / "trajectories.jsonl").read_bytes()
    ledger = out / "ledger.db"
    if damage == "empty":
        ledger.write_bytes(b"")
    elif damage == "garbage":
        ledger.write_bytes(bytes(range(256)) * 64)
    elif damage == "text":
        ledger.write_text("this is not a database\n")
    else:
        ledger.unlink()
    expected = {"empty": "is empty (0 bytes)", "garbage": "is not a usable SQLite database",
                "text": "is not a usable SQLite database", "deleted": "but no ledger.db"}[damage]
    for action in ("run", "export"):
        result = run_cli(tmp_path, *args, f"action={action}")
        if damage == "deleted" and action == "export":
            _clean_failure(result, 2, "no ledger in")
        else:
            _clean_failure(result, 2, expected, "fix: restore ledger.db", "run_name=")
    assert (out / "trajectories.jsonl").read_bytes() == before


def test_an_export_never_silently_shrinks(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"Shrink {i}"} for i in range(5)])
    args = [f"dataset.path={data}", "run_name=shrink", "model.retry.max_attempts=1", "resume.task_attempts=1"]
    assert run_cli(tmp_path, *args).returncode == 0
    out = tmp_path / "outputs" / "shrink"
    before = (out / "trajectories.jsonl").read_bytes()
    # every task runs again and now fails: the ledger would export nothing
    rerun = run_cli(tmp_path, *args, "resume.redo_all=true", "model.mock_server.fail_rate=1.0")
    _clean_failure(rerun, 2, "holds 5 trajectories but the ledger now keeps only 0",
                   "action=export outputs.allow_shrink=true")
    assert (out / "trajectories.jsonl").read_bytes() == before
    asked = run_cli(tmp_path, *args, "action=export", "outputs.allow_shrink=true")
    assert asked.returncode == 0, asked.stderr
    assert (out / "trajectories.jsonl").read_text() == ""


def _requests_by_prompt(record: Path) -> Counter:
    return Counter(user_prompt(body) for body in agent_bodies(record))


@pytest.mark.slow
def test_a_dataset_rewritten_during_the_run(tmp_path: Path) -> None:
    n = 24
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"Original {i}"} for i in range(n)])
    record = tmp_path / "requests.jsonl"
    with MockServer(latency_ms=60, record_path=str(record)) as server:
        args = [f"dataset.path={data}", "run_name=rw", "num_workers=2", f"model.base_url={server.base_url}"]
        proc = subprocess.Popen([sys.executable, "-m", "hermes_exp.cli", *args], cwd=tmp_path, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while done_rows(tmp_path / "outputs" / "rw" / "ledger.db") < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        with data.open("r+", encoding="utf-8") as fh:  # in place: same inode, same line count
            fh.write("".join(json.dumps({"prompt": f"Replaced {i}"}) + "\n" for i in range(n)))
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr
        assert "changed while this run used it" in stderr
        first = read_jsonl(tmp_path / "outputs" / "rw" / "trajectories.jsonl")
        asked = _requests_by_prompt(record)
        # every task ran the row it was keyed by, once; nothing of the new content ran yet
        assert sorted(r["conversations"][1]["value"] for r in first) == sorted(f"Original {i}" for i in range(n))
        assert not [p for p in asked if p.startswith("Replaced")]
        again = run_cli(tmp_path, *args)
        assert again.returncode == 0, again.stderr
    # the outputs follow the dataset as it is now; the original rows' results stay in the ledger
    assert f"{n} task(s) in the ledger are no longer in the dataset" in again.stderr
    rows = read_jsonl(tmp_path / "outputs" / "rw" / "trajectories.jsonl")
    assert Counter(r["conversations"][1]["value"].split()[0] for r in rows) == {"Replaced": n}
    with sqlite3.connect(tmp_path / "outputs" / "rw" / "ledger.db") as db:
        kept = Counter(p.split()[0] for (p,) in db.execute("SELECT prompt FROM tasks WHERE state = 'done'"))
    assert kept == {"Original": n, "Replaced": n}


@pytest.mark.slow
def test_a_full_disk_is_a_clear_error_and_loses_nothing(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=768k", "tmpfs", str(disk)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        n = 60
        data = write_dataset(tmp_path / "p.jsonl",
                             [{"prompt": f"RUN: yes {i} | head -c 12000\nFull {i}"}
                              for i in range(n)])
        args = [f"dataset.path={data}", "run_name=full", "distribution=terminal_only",
                f"sandbox.root={tmp_path / 'sb'}", "sandbox=local"]
        full = run_cli(disk, *args)
        _clean_failure(full, 2, "no space left on the device", "run the same command again")
        kept = done_rows(disk / "outputs" / "full" / "ledger.db")
        assert 0 < kept < n
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        again = run_cli(disk, *args)
        assert again.returncode == 0, again.stderr
        rows = read_jsonl(disk / "outputs" / "full" / "trajectories.jsonl")
        assert sorted(r["prompt_index"] for r in rows) == list(range(n))
    finally:
        subprocess.run(["umount", "-l", str(disk)])
        shutil.rmtree(tmp_path / "sb", ignore_errors=True)


def test_unrunnable_tool_arguments_are_tool_errors_the_model_sees(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "RUN: echo a\u0000b"},
                                                {"prompt": "RUN: echo " + "x" * 1_000_000}])
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=args", "distribution=terminal_only",
                     "sandbox=local", "filters=none")
    assert result.returncode == 0, result.stderr
    rows = read_jsonl(tmp_path / "outputs" / "args" / "trajectories.jsonl")
    assert len(rows) == 2
    for row in rows:
        assert row["tool_stats"]["terminal"] == {"count": 1, "success": 0, "failure": 1}
        assert any("NUL byte" in t["value"] or "more than the 100000" in t["value"]
                   for t in row["conversations"] if t["from"] == "tool")
