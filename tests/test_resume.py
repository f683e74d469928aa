"""Resume never loses, repeats or mixes work: real kills of real runner processes, real SQLite."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import (agent_bodies, agent_request_count, done_rows, read_jsonl, request_count, run_cli,
                      user_prompt, write_dataset)
from test_compress import train_tokenizer

from hermes_exp.mock.server import MockServer
from hermes_exp.run.lock import RunLock


def _start(cwd: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "hermes_exp.cli", *args], cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _requests_by_prompt(record: Path) -> Counter:
    """Agent turns per user prompt (see conftest.agent_bodies)."""
    return Counter(user_prompt(b) for b in agent_bodies(record))


def _check_final(out: Path, n: int) -> list[dict]:
    lines = (out / "trajectories.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]  # every line is valid JSON
    assert sorted(r["prompt_index"] for r in rows) == list(range(n))
    with sqlite3.connect(out / "ledger.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT COUNT(*) FROM tasks WHERE state != 'done'").fetchone()[0] == 0
    batch_rows = [r for b in out.glob("batch_*.jsonl") for r in read_jsonl(b)]
    assert sorted(r["prompt_index"] for r in batch_rows) == list(range(n))
    return rows


@pytest.mark.slow
def test_chaos_sigkill_then_resume_loses_and_repeats_nothing(tmp_path: Path) -> None:
    n, workers, kills = 240, 12, 4
    rows = [{"prompt": f"Chaos task {i}: count the words"} for i in range(n)]
    data = write_dataset(tmp_path / "p.jsonl", rows)
    record = tmp_path / "requests.jsonl"
    rng = random.Random(1234)
    with MockServer(latency_ms=15, record_path=str(record)) as server:
        args = [f"dataset.path={data}", "run_name=chaos", f"num_workers={workers}", "batch_size=25",
                f"model.base_url={server.base_url}", f"sandbox.root={tmp_path / 'sb'}"]
        killed = 0
        for _ in range(kills):
            proc = _start(tmp_path, *args)
            time.sleep(rng.uniform(1.2, 2.5))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                killed += 1
            proc.communicate(timeout=30)
        final = run_cli(tmp_path, *args)
    assert final.returncode == 0, final.stderr
    assert killed >= 2, "the runs finished before they could be killed: raise n or latency"
    out = tmp_path / "outputs" / "chaos"
    trajectories = _check_final(out, n)
    per_prompt = _requests_by_prompt(record)
    wasted = sum(per_prompt[t["conversations"][1]["value"]] - t["api_calls"] for t in trajectories)
    assert all(per_prompt[t["conversations"][1]["value"]] >= t["api_calls"] for t in trajectories)
    # Only conversations in flight at a kill are paid twice: at most (workers + pre-dispatched) per kill.
    assert wasted <= killed * workers * 2 * 5
    assert sum(per_prompt.values()) == sum(t["api_calls"] for t in trajectories) + wasted
    assert not list((tmp_path / "sb").glob("hx-*")), "sandbox dirs of killed runs were not reaped"


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["threads", "processes"])
def test_sigint_commits_closes_sandboxes_and_says_how_to_resume(executor: str, tmp_path: Path) -> None:
    n = 40
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"RUN: sleep 0.2\nSigint {i}"} for i in range(n)])
    record = tmp_path / "requests.jsonl"
    with MockServer(latency_ms=80, record_path=str(record)) as server:
        args = [f"dataset.path={data}", "run_name=int", "num_workers=4", f"model.base_url={server.base_url}",
                f"sandbox.root={tmp_path / 'sb'}", f"executor={executor}"]
        proc = _start(tmp_path, *args)
        deadline = time.monotonic() + 60
        while done_rows(tmp_path / "outputs" / "int" / "ledger.db") < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 130, stderr
        assert "To resume, run the same command again" in stderr and "run_name=int" in stderr
        assert not list((tmp_path / "sb").iterdir()), "sandboxes left after SIGINT"
        done_before = done_rows(tmp_path / "outputs" / "int" / "ledger.db")
        assert 3 <= done_before < n
        assert len(read_jsonl(tmp_path / "outputs" / "int" / "trajectories.jsonl")) == done_before
        final = run_cli(tmp_path, *args)
    assert final.returncode == 0, final.stderr
    trajectories = _check_final(tmp_path / "outputs" / "int", n)
    assert agent_request_count(record) - sum(t["api_calls"] for t in trajectories) <= 4 * 2


def test_duplicates_kept_and_reordering_runs_nothing(tmp_path: Path, mock_server) -> None:
    rows = [{"prompt": f"Distinct prompt {i}"} for i in range(95)]
    rows += [dict(rows[i]) for i in (3, 3, 10, 50, 94)]  # 5% duplicates, one of them twice
    data = write_dataset(tmp_path / "p.jsonl", rows)
    args = [f"dataset.path={data}", "run_name=dups", "num_workers=8", f"model.base_url={mock_server.base_url}"]
    assert run_cli(tmp_path, *args).returncode == 0
    out = tmp_path / "outputs" / "dups"
    first = read_jsonl(out / "trajectories.jsonl")
    assert len(first) == 100
    assert Counter(r["conversations"][1]["value"] for r in first)["Distinct prompt 3"] == 3
    calls = request_count(tmp_path / "requests.jsonl")

    random.Random(5).shuffle(rows)
    write_dataset(data, rows)
    again = run_cli(tmp_path, *args)
    assert again.returncode == 0, again.stderr
    assert request_count(tmp_path / "requests.jsonl") == calls
    second = read_jsonl(out / "trajectories.jsonl")
    assert len(second) == 100
    assert all(r["conversations"][1]["value"] == rows[r["prompt_index"]]["prompt"] for r in second)

    write_dataset(data, rows + [{"prompt": "Appended later"}])
    assert run_cli(tmp_path, *args).returncode == 0
    assert len(read_jsonl(out / "trajectories.jsonl")) == 101
    assert _requests_by_prompt(tmp_path / "requests.jsonl").keys() == {r["prompt"] for r in rows} | {"Appended later"}


def test_provider_errors_are_retried_exactly_on_rerun(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"Flaky {i}"} for i in range(30)])
    record = tmp_path / "requests.jsonl"
    with MockServer(fail_rate=0.3, record_path=str(record)) as server:
        args = [f"dataset.path={data}", "run_name=flaky", "num_workers=6", f"model.base_url={server.base_url}",
                "model.retry.max_attempts=1", "resume.task_attempts=1"]
        first = run_cli(tmp_path, *args)
        assert first.returncode == 3, first.stderr
        assert "the same command again retries" in first.stderr and "resume.retry_errors=[provider]" in first.stderr
        with sqlite3.connect(tmp_path / "outputs" / "flaky" / "ledger.db") as conn:
            states = dict(conn.execute("SELECT prompt, state || ':' || COALESCE(error_class, '') FROM tasks"))
        errored = {p for p, s in states.items() if s.startswith("error")}
        assert errored and set(states.values()) <= {"done:", "error:provider"}
        stats = json.loads((tmp_path / "outputs" / "flaky" / "statistics.json").read_text())
        assert stats["errors"] == {"provider": len(errored)}

        before = agent_request_count(record)
        server.fail_rate = 0.0
        second = run_cli(tmp_path, *args)
        assert second.returncode == 0, second.stderr
        asked = {user_prompt(b) for b in agent_bodies(record)[before:]}
        assert asked == errored
    assert len(read_jsonl(tmp_path / "outputs" / "flaky" / "trajectories.jsonl")) == 30


def test_identity_change_refused_but_workers_change_accepted(tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"Id {i}"} for i in range(4)])
    args = [f"dataset.path={data}", "run_name=ident", f"model.base_url={mock_server.base_url}",
            "outputs.formats=[sharegpt,openai,atif]"]
    assert run_cli(tmp_path, *args).returncode == 0
    refused = run_cli(tmp_path, *args, "max_turns=5")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "max_turns (10 -> 5)" in refused.stderr and "run_name=" in refused.stderr
    assert "resume.new_identity=true" in refused.stderr
    accepted = run_cli(tmp_path, *args, "num_workers=7", "batch_size=2")
    assert accepted.returncode == 0 and "nothing to run" in accepted.stderr
    # compressed outputs of the old experiment (every row under the target: no summariser call)
    tokenizer = f"compress.tokenizer={train_tokenizer(tmp_path / 'tokenizer.json')}"
    compressed = run_cli(tmp_path, *args, "action=compress", tokenizer, "compress.target_max_tokens=1000000")
    assert compressed.returncode == 0, compressed.stderr
    run_dir = tmp_path / "outputs" / "ident"
    metrics = json.loads((run_dir / "compression_metrics.json").read_text())
    fresh = run_cli(tmp_path, *args, "max_turns=5", "resume.new_identity=true")
    assert fresh.returncode == 0, fresh.stderr
    [archived] = (run_dir / "archive").glob("*/ledger.db")
    # the old experiment's outputs go with its ledger, whatever formats it had, its compression's too
    assert {p.name for p in archived.parent.glob("trajectories.*")} == {
        "trajectories.jsonl", "trajectories.openai.jsonl", "trajectories.atif.jsonl", "trajectories.compressed.jsonl"}
    assert json.loads((archived.parent / "compression_metrics.json").read_text()) == metrics
    assert not (run_dir / "compression_metrics.json").exists() and (run_dir / "statistics.json").is_file()


def test_second_invocation_on_a_busy_run_dir_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "outputs" / "busy"
    with RunLock(run_dir):
        result = run_cli(tmp_path, "run_name=busy")
    assert result.returncode == 2
    assert f"in use by another hermes-exp process (pid {os.getpid()})" in result.stderr


def test_export_action_refilters_without_model_calls(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"Refilter {i}"} for i in range(20)])
    args = [f"dataset.path={data}", "run_name=refilter", "model.mock_server.no_reasoning_rate=0.5"]
    assert run_cli(tmp_path, *args, "filters=none").returncode == 0
    out = tmp_path / "outputs" / "refilter"
    assert len(read_jsonl(out / "trajectories.jsonl")) == 20
    calls = json.loads((out / "statistics.json").read_text())["api_calls"]
    result = run_cli(tmp_path, *args, "filters=default", "action=export")
    assert result.returncode == 0, result.stderr
    stats = json.loads((out / "statistics.json").read_text())
    kept = len(read_jsonl(out / "trajectories.jsonl"))
    assert 0 < kept < 20 and stats["kept"] == kept
    assert stats["discarded"] == {"no_reasoning": 20 - kept}
    assert stats["api_calls"] == calls and stats["invocations"] == 1


def test_older_ledger_is_migrated_on_open(tmp_path: Path) -> None:
    import sqlite_utils

    from hermes_exp.store import migrations
    from hermes_exp.store.ledger import Ledger

    path = tmp_path / "ledger.db"
    old = sqlite_utils.Database(path)
    old["_migrations"].create({"name": str, "applied_at": float}, pk="name")
    name, first = migrations.MIGRATIONS[0]
    first(old)
    old["_migrations"].insert({"name": name, "applied_at": 0.0})
    old["tasks"].insert({"key": "v1:x", "prompt_index": 0, "prompt": "p", "state": "done"})
    old.close()
    ledger = Ledger(path)
    applied = [r["name"] for r in ledger.db["_migrations"].rows]
    assert applied == [n for n, _ in migrations.MIGRATIONS] and len(applied) > 1
    assert ledger.states() == {"v1:x": ("done", None)}
    ledger.close()


@pytest.mark.slow
def test_sweep_killed_midway_resumes_every_job(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"Sweep {i}"} for i in range(60)])
    record = tmp_path / "requests.jsonl"
    with MockServer(latency_ms=20, record_path=str(record)) as server:
        args = ["-m", "model.name=mock-a,mock-b", f"dataset.path={data}", "run_name=sweep", "num_workers=4",
                f"model.base_url={server.base_url}"]
        proc = _start(tmp_path, *args)
        deadline = time.monotonic() + 60
        while done_rows(tmp_path / "outputs" / "sweep" / "model.name=mock-a" / "ledger.db") < 20:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        final = run_cli(tmp_path, *args)
    assert final.returncode == 0, final.stderr
    total_calls = 0
    for job in ("model.name=mock-a", "model.name=mock-b"):
        rows = _check_final(tmp_path / "outputs" / "sweep" / job, 60)
        assert {r["metadata"]["model"] for r in rows} == {job.split("=")[1]}
        total_calls += sum(r["api_calls"] for r in rows)
    assert agent_request_count(record) - total_calls <= 4 * 2 * 5


def test_edited_and_removed_rows_leave_the_outputs_but_stay_in_the_ledger(tmp_path: Path, mock_server) -> None:
    broken = {"prompt": "RUN: true\nslow check", "verify": "sleep 3"}
    fixed = {"prompt": "RUN: true\nfixed check", "verify": "true"}
    other = {"prompt": "RUN: true\nquick check", "verify": "true"}
    data = write_dataset(tmp_path / "t.jsonl", [broken, other])
    args = [f"dataset.path={data}", "run_name=edits", "verifier=command", "sandbox=local", "filters=none",
            "verifier.timeout_seconds=0.5", f"model.base_url={mock_server.base_url}"]
    out = tmp_path / "outputs" / "edits"
    assert run_cli(tmp_path, *args).returncode == 3  # the slow check fails its verification

    write_dataset(data, [fixed, other])  # the user fixes the row: a new task; the old one is no longer asked for
    again = run_cli(tmp_path, *args)
    assert again.returncode == 0, again.stderr  # the edited-away failure no longer fails the run
    assert "1 task(s) in the ledger are no longer in the dataset" in again.stderr
    stats = json.loads((out / "statistics.json").read_text())
    assert stats["errors"] == {} and stats["verification"]["scored"] == 2
    assert [r["conversations"][1]["value"] for r in read_jsonl(out / "trajectories.jsonl")] == \
        [fixed["prompt"], other["prompt"]]

    write_dataset(data, [fixed])  # a removed row leaves the outputs ...
    assert run_cli(tmp_path, *args).returncode == 0
    assert len(read_jsonl(out / "trajectories.jsonl")) == 1
    calls = request_count(tmp_path / "requests.jsonl")
    write_dataset(data, [fixed, other])  # ... and comes back from the ledger, with no model call
    assert run_cli(tmp_path, *args).returncode == 0
    assert len(read_jsonl(out / "trajectories.jsonl")) == 2
    assert request_count(tmp_path / "requests.jsonl") == calls
    with sqlite3.connect(out / "ledger.db") as db:
        assert db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0] == 3  # nothing was deleted
