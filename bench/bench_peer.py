"""hermes-exp against inspect_ai, side by side: the same mock model (one process, fixed latency), the same
prompts, one `terminal` tool on a local sandbox (each prompt: one command, then the answer: 2 model calls), the same number of concurrent sessions, in one run of this
script with the variants interleaved. Measured for each whole command: wall seconds and the CPU of its whole
process tree (the command's own, its tool commands', any worker process's), per prompt. The mock's CPU is
not counted for either.

inspect_ai runs from a venv of its own (created on first use: `pip install inspect-ai==VERSION openai`); its
version is printed. Issue 31's figures at 64 sessions: >= 8x less CPU per prompt, >= 5x less wall time.

usage: python bench/bench_peer.py [-n 256] [--sessions 64] [--latency-ms 200] [--rounds 2]
                                  [--inspect-venv /var/tmp/hx-inspect-venv] [--inspect-version 0.3.285]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import mock_server, print_table, write_prompts

# The peer's task: one tool named `terminal` (the mock model calls it by that name), run in inspect's local
# sandbox, one sample per prompt; the mock's default plan for a tool list of one terminal is one command then
# the answer, as it is for hermes-exp's distribution=terminal_only (2 model calls per prompt).
INSPECT_TASK = '''
import json
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.solver import generate, use_tools
from inspect_ai.tool import tool
from inspect_ai.util import sandbox


@tool
def terminal():
    async def execute(command: str):
        """Run a shell command.

        Args:
            command: the command to run
        """
        result = await sandbox().exec(["bash", "-c", command])
        return result.stdout + result.stderr
    return execute


@task
def peer(prompts: str):
    rows = [json.loads(line) for line in open(prompts)]
    return Task(dataset=[Sample(input=row["prompt"], target="") for row in rows],
                solver=[use_tools(terminal()), generate()], sandbox="local")
'''


def ensure_inspect(venv: Path, version: str) -> str:
    """The inspect venv's python (made on first use) and the version it holds."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", f"inspect-ai=={version}", "openai"], check=True)
    found = subprocess.run([str(python), "-c", "import inspect_ai; print(inspect_ai.__version__)"],
                           capture_output=True, text=True, check=True).stdout.strip()
    return found


def measured(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds and CPU seconds of the whole process tree of one command (RUSAGE_CHILDREN covers every
    descendant that was waited for, which a command's own children are by the time it exits)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} exited {proc.returncode}:\n{(proc.stderr or proc.stdout)[-3000:]}")
    return wall, cpu, proc.stderr


def run_hermes(work: Path, data: Path, url: str, sessions: int, tag: str) -> tuple[float, float]:
    argv = [sys.executable, "-m", "hermes_exp.cli", f"dataset.path={data}", f"run_name=peer_{tag}",
            f"model.base_url={url}", "sandbox=local", f"num_workers={sessions}", "distribution=terminal_only"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    wall, cpu, _ = measured(argv, work, env)
    return wall, cpu


def run_inspect(work: Path, python: str, data: Path, url: str, sessions: int, tag: str) -> tuple[float, float]:
    task_file = work / "peer_task.py"
    task_file.write_text(INSPECT_TASK)
    inspect = str(Path(python).parent / "inspect")
    argv = [inspect, "eval", f"{task_file}@peer", "-T", f"prompts={data}", "--model", "openai-api/mock/mock",
            f"--max-connections={sessions}", f"--max-samples={sessions}", f"--max-subprocesses={sessions}",
            "--log-dir", str(work / f"inspect_logs_{tag}"), "--display", "none"]
    env = {**os.environ, "MOCK_BASE_URL": url, "MOCK_API_KEY": "none", "INSPECT_LOG_LEVEL": "warning"}
    wall, cpu, _ = measured(argv, work, env)
    return wall, cpu


def _lines(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open("rb") as fh:
        return sum(1 for _ in fh)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--prompts", dest="n", type=int, default=256)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--inspect-venv", type=Path, default=Path("/var/tmp/hx-inspect-venv"))
    parser.add_argument("--inspect-version", default="0.3.285")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    version = ensure_inspect(args.inspect_venv, args.inspect_version)
    print(f"inspect_ai {version} ({args.inspect_venv}); {args.n} prompts, {args.sessions} sessions, "
          f"{args.latency_ms:g} ms per call")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="hx-bench-peer-"))
    data = write_prompts(work / "prompts.jsonl",
                         [{"prompt": f"Peer prompt {i}: count the words.\nRUN: echo peer prompt {i} | wc -w"} for i in range(args.n)])
    python = str(args.inspect_venv / "bin" / "python")
    rows: list[list[Any]] = []
    record = work / "mock_requests.jsonl"  # one line per model call: both runners must make the same number
    with mock_server(args.latency_ms, ("--record", str(record))) as url:
        for r in range(args.rounds):
            order = ["hermes-exp", "inspect_ai"] if r % 2 == 0 else ["inspect_ai", "hermes-exp"]
            for name in order:
                load, calls_before = os.getloadavg()[0], _lines(record)
                if name == "hermes-exp":
                    wall, cpu = run_hermes(work, data, url, args.sessions, f"r{r}")
                else:
                    wall, cpu = run_inspect(work, python, data, url, args.sessions, f"r{r}")
                rows.append([name, r + 1, f"{load:.1f}", _lines(record) - calls_before, wall, cpu * 1000 / args.n])
    print_table(["runner", "round", "load", "model calls", "wall s", "CPU ms/prompt (whole tree)"], rows)
    for r in range(args.rounds):
        ours, peer = (next(x for x in rows if x[0] == n and x[1] == r + 1) for n in ("hermes-exp", "inspect_ai"))
        print(f"round {r + 1}: inspect_ai / hermes-exp = {peer[4] / ours[4]:.2f}x wall, "
              f"{peer[5] / ours[5]:.2f}x CPU per prompt")


if __name__ == "__main__":
    main()
