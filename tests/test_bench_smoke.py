"""The benchmark scripts run end to end with tiny parameters and print their tables. No timing is
asserted: the numbers belong in bench/RESULTS.md, measured on a known machine."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sandbox.conftest import IMAGE, docker_problem, unavailable

BENCH = Path(__file__).resolve().parent.parent / "bench"


def bench(script: str, *args: str, timeout: float = 300) -> str:
    result = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, f"{script} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.mark.slow
def need_engine() -> None:
    """Skip (or, where the engine is required, fail) the test when no Docker engine answers."""
    problem = docker_problem()
    if problem:
        unavailable(problem)


def test_bench_runner_prints_throughput_and_resume_tables(tmp_path: Path) -> None:
    out = bench("bench_runner.py", "-n", "10", "--concurrency", "2", "--latency-ms", "10",
                "--resume-tasks", "50", "--workdir", str(tmp_path))
    assert "| workers |" in out and "ideal/window" in out and "CPU ms/model call" in out and "CPU ms/tool call" in out
    assert "| tasks |" in out and "planning s" in out
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines() if line.startswith("|")]
    # 10 prompts x 2 model calls (read back from statistics.json), 1 tool call each (counted in the runner)
    assert ["2", "20", "10"] in [r[:3] for r in rows]
    assert ["50"] in [r[:1] for r in rows]  # the no-op invocation over 50 finished tasks



@pytest.mark.slow
def test_bench_runner_full_plan_makes_five_calls_per_prompt(tmp_path: Path) -> None:
    out = bench("bench_runner.py", "-n", "4", "--concurrency", "2", "--latency-ms", "10", "--plan", "full",
                "--resume-tasks", "0", "--workdir", str(tmp_path))
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines() if line.startswith("|")]
    # 4 prompts x 5 model calls, 6 tool calls each: the mock's 4 of the terminal/file plan, and the start and
    # poll of a background job riding along
    assert ["2", "20", "24"] in [r[:3] for r in rows]


@pytest.mark.slow
def test_bench_peer_runs_both_runners_on_the_same_calls(tmp_path: Path) -> None:
    """inspect_ai from a venv of its own (made on first use, ~2 min; kept in /var/tmp for the next run)."""
    out = bench("bench_peer.py", "-n", "4", "--sessions", "2", "--latency-ms", "10", "--rounds", "1",
                "--workdir", str(tmp_path), timeout=900)
    assert out.startswith("inspect_ai 0.3.285 ")
    rows = {r[0]: r for r in ([c.strip() for c in line.strip("|").split("|")] for line in out.splitlines()
                              if line.startswith("| ") and "round" not in line)}
    assert rows["hermes-exp"][3] == rows["inspect_ai"][3] == "8"  # 4 prompts x 2 model calls, on the same mock
    assert "inspect_ai / hermes-exp = " in out


@pytest.mark.slow
def test_bench_calls_prints_the_runners_cpu_per_part_for_each_round() -> None:
    out = bench("bench_calls.py", "-n", "4", "--workers", "2", "--latency-ms", "10", "--rounds", "2")
    rows = {r[0]: r[1:] for r in ([c.strip() for c in line.strip("|").split("|")] for line in out.splitlines()
                                  if line.startswith("|") and not line.startswith("|-"))}
    assert len(rows["part"]) == 2  # a column per run
    for part in ("complete", "complete > post", "complete > encode", "tool calls", "session (run_task)",
                 "ledger_row", "Ledger.record", "export", "process, all threads"):
        assert all(float(v) > 0 for v in rows[part]), part
    assert all(float(p) > float(c) for p, c in zip(rows["process, all threads"], rows["complete"]))

def test_bench_commands_prints_per_command_cpu_per_thread_count() -> None:
    out = bench("bench_commands.py", "--threads", "1,3", "--commands", "5", "--total", "6",
                "--rounds", "1")
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines() if line.startswith("| ")]
    assert [r[:2] for r in rows[1:]] == [["1", "5"], ["3", "15"]] and "exec ms" in out


def test_bench_tools_prints_thread_cpu_per_tool() -> None:
    out = bench("bench_tools.py", "-n", "2", "--threads", "2", "--turn-ms", "0")
    rows = {r[0]: r[1] for r in ([c.strip() for c in line.strip("|").split("|")] for line in out.splitlines()
                                 if line.startswith("| "))}
    assert rows["search_files"] == "2" and rows["process (wait)"] == "2" and rows["all"] == "12"


def test_bench_sandbox_local_overhead_table() -> None:
    out = bench("bench_sandbox.py", "-n", "3", "--backends", "local", "--runner-prompts", "0")
    assert "open ms" in out and "\nlocal " in out


@pytest.mark.docker
@pytest.mark.slow
def test_bench_sandbox_docker_runner_table() -> None:
    need_engine()
    out = bench("bench_sandbox.py", "-n", "2", "--backends", "docker", "--image", IMAGE,
                "--runner-prompts", "4", "--max-sandboxes", "1,2", "--workers", "2", "--latency-ms", "10")
    assert "\ndocker " in out and "max_sandboxes" in out
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["1"], ["2"])]
    assert [r[0] for r in rows] == ["1", "2"] and all(r[1] == "20" for r in rows)  # 4 prompts x 5 calls


@pytest.mark.docker
def test_bench_docker_per_call_table() -> None:
    need_engine()
    out = bench("bench_docker.py", "--sessions", "1,2", "--prompts", "2", "--image", IMAGE,
                "--override", "warm_pool=1")
    table = out.split("client CPU ms/prompt\n")[1].split("\n\n")[0]
    rows = [line.split() for line in table.splitlines()]
    assert [r[0] for r in rows] == ["1", "2"] and all(len(r) == 7 for r in rows)
    assert all(float(r[5]) > 0 for r in rows), out  # the engine's CPU per prompt, whatever its source
    assert "engine CPU from: " in out and "exec_create" in out and "2 sessions: engine calls per prompt" in out


@pytest.mark.docker
def test_bench_docker_interleaves_variants() -> None:
    need_engine()
    out = bench("bench_docker.py", "--sessions", "1", "--prompts", "1", "--image", IMAGE, "--rounds", "2",
                "--variant", "sync=remove_in_background=false", "--variant", "bg=")
    assert "round 1: sync -> bg" in out and "round 2: bg -> sync" in out and "median over 2 round(s)" in out
    table = out.split("variant      sessions")[1].split("\n\n")[0].splitlines()[1:]
    assert [row.split()[:2] for row in table] == [["sync", "1"], ["bg", "1"]] and "bg, 1 sessions, last round: engine calls per prompt" in out


@pytest.mark.docker
def test_bench_docker_files_compares_archive_and_exec_per_runtime() -> None:
    need_engine()
    out = bench("bench_docker_files.py", "--runtimes", "runc", "--sessions", "1", "--ops", "1", "--rounds", "1",
                "--image", IMAGE)
    rows = [line.split() for line in out.split("engine CPU ms\n")[1].splitlines()]
    assert [" ".join(r[2:4]) if len(r) == 6 else r[2] for r in rows] == ["open+close", "archive write", "archive read", "exec write", "exec read",
                                                 "exec true"] and all(r[:2] == ["runc", "1"] for r in rows)


def test_bench_inputs_prints_one_row_per_format(tmp_path: Path) -> None:
    pytest.importorskip("datasets")
    out = bench("bench_inputs.py", "-n", "50", "--prompt-chars", "20", "--workdir", str(tmp_path))
    rows = [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows == ["format", "jsonl", "csv", "parquet", "hf"]


def test_bench_verify_local_table() -> None:
    out = bench("bench_verify.py", "-n", "1", "--backends", "local", "--files", "3")
    assert "verify ms" in out and "archive bytes" in out and "\nlocal " in out


@pytest.mark.slow
def test_bench_harbor_read_and_container_tables() -> None:
    need_engine()
    out = bench("bench_harbor.py", "--tasks", "3", "--env-kb", "1", "-n", "1", "--image", IMAGE)
    assert "| 3 | 1 |" in out and "second/first" in out
    firsts = [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    assert firsts == ["tasks", "3", "container (open+exec+close)", "plain", "build", "reuse", "next run"]



@pytest.mark.slow
def test_bench_export_prints_the_resume_table_and_compares_the_installs(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, str(BENCH / "bench_export.py"), "--python", sys.executable, "--python",
                             sys.executable, "--tasks", "30", "--new", "2", "--rounds", "1", "--workdir", str(tmp_path)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "settled outputs of the two installs differ in: nothing" in result.stderr
    assert "resume with 2 new rows over 30 settled tasks" in result.stdout
    assert "|       CPU s |" in result.stdout and "| peak RSS MB |" in result.stdout


@pytest.mark.slow
@pytest.mark.docker
def test_bench_engines_prints_a_row_per_engine() -> None:
    """One prompt on a private Podman service (the script starts and stops it)."""
    if os.geteuid() != 0 or not shutil.which("podman"):
        unavailable("bench_engines.py needs root and podman (apt-get install podman)")
    out = bench("bench_engines.py", "--prompts", "1", "--engines", "podman")
    rows = [line for line in out.splitlines() if line.startswith("| podman |")]
    assert len(rows) == 1 and len(rows[0].strip("|").split("|")) == 9, out
