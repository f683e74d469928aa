"""Shared pieces of the runner benchmarks: an external mock model server, the real CLI in a
subprocess with its resource usage, and table printing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# A function wrapped to add the calling thread's CPU of each call (time.thread_time: the GIL wait is no
# CPU) to `add(seconds)`; code for the runner's process, shared by WRAPPER and bench_calls.py's.
THREAD_TIMED = """
def _thread_timed(inner, add):
    def timed(*args, **kwargs):
        start = time.thread_time()
        try:
            return inner(*args, **kwargs)
        finally:
            add(time.thread_time() - start)
    return timed
"""

# Runs the CLI exactly as `python -m hermes_exp.cli ARGS` does, and at exit writes the runner's own
# resource usage (RUSAGE_SELF: every thread of the runner) apart from that of the processes it ran
# (RUSAGE_CHILDREN: tool commands), plus when imports ended, to the file named by HX_BENCH_RUSAGE.
# The CPU of a start before hermes_exp.launch's re-exec stays in RUSAGE_SELF (it survives execve).
# Peak memory is VmHWM, not ru_maxrss: Linux folds the pre-exec address space (this benchmark's own,
# with vfork) into ru_maxrss, which would report the benchmark's memory as the runner's.
WRAPPER = """
import atexit, json, os, resource, runpy, sys, threading, time
""" + THREAD_TIMED + """
try:  # what the hermes-exp command does before anything else: start again with glibc's thread cache off
    from hermes_exp.launch import reexec
except ImportError:  # a runner from before hermes_exp/launch.py
    reexec = None
if reexec is not None:
    reexec()
_TOOLS = {"calls": 0, "cpu": 0.0}
_TOOLS_LOCK = threading.Lock()
def _timed_tools():
    # CPU of the calling thread only: what the runner spends on a tool call, the spawn, pipes and result
    # handling included; the command's own CPU is RUSAGE_CHILDREN.
    # the registry's dispatch (importing the agent loop here would import openai and distort start-up)
    from hermes_exp.tools.registry import Registry
    def add(spent):
        with _TOOLS_LOCK:
            _TOOLS["calls"] += 1
            _TOOLS["cpu"] += spent
    Registry.call = _thread_timed(Registry.call, add)
def _hwm_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
def _dump():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.environ["HX_BENCH_RUSAGE"], "w") as f:
        json.dump({"self_cpu": s.ru_utime + s.ru_stime, "self_sys": s.ru_stime, "children_cpu": c.ru_utime + c.ru_stime,
                   "maxrss_kb": _hwm_kb(), "imported": IMPORTED, "exited": time.time(),
                   "tool_calls": _TOOLS["calls"], "tool_cpu": _TOOLS["cpu"]}, f)
atexit.register(_dump)
_timed_tools()
import hermes_exp.cli.app, hermes_exp.run.invocation
IMPORTED = time.time()
runpy.run_module("hermes_exp.cli.app", run_name="__main__", alter_sys=True)
"""


@dataclass
class Invocation:
    """One CLI invocation: exit code, wall seconds, and the runner's own resource usage."""

    code: int
    wall: float
    startup: float  # process start until the runner's modules are imported
    self_cpu: float  # the runner process's own CPU seconds (all its threads)
    self_sys: float  # the kernel's part of self_cpu
    children_cpu: float  # CPU seconds of the processes it ran (tool commands in the sandbox)
    maxrss_mb: float
    stderr: str
    tool_calls: int = 0  # tool calls the agent loop made
    tool_cpu: float = 0.0  # runner CPU seconds spent inside them (their threads), the commands' own excluded


def run_cli(cwd: Path, args: list[str], env: dict[str, str] | None = None, timeout: float = 3600,
            python: str = sys.executable) -> Invocation:
    """`python -m hermes_exp.cli ARGS` in `cwd` (through WRAPPER), with the runner's own resource usage."""
    usage_file = cwd / f".rusage-{os.getpid()}-{time.monotonic_ns()}.json"
    full_env = {**os.environ, **(env or {}), "HX_BENCH_RUSAGE": str(usage_file)}
    # A user's second invocation imports cached bytecode; with PYTHONDONTWRITEBYTECODE (set on these
    # machines) every invocation would compile the package again (~0.3 s of each no-op).
    full_env.pop("PYTHONDONTWRITEBYTECODE", None)
    started = time.time()
    proc = subprocess.Popen([python, "-c", WRAPPER, *args], cwd=cwd, env=full_env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise SystemExit(f"the runner did not finish within {timeout:g}s: {' '.join(args)}")
    wall = time.time() - started
    if not usage_file.exists():
        raise SystemExit(f"the runner exited {proc.returncode} without reporting its usage:\n{stderr[-3000:]}")
    usage = json.loads(usage_file.read_text())
    usage_file.unlink()
    return Invocation(proc.returncode, wall, usage["imported"] - started, usage["self_cpu"],
                      usage["self_sys"], usage["children_cpu"], usage["maxrss_kb"] / 1024, stderr,
                      usage.get("tool_calls", 0), usage.get("tool_cpu", 0.0))


class MockProcess(str):
    """The mock server's base URL, which also tells the CPU seconds its process has used so far."""

    pid: int

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


@contextmanager
def mock_server(latency_ms: float, extra: tuple[str, ...] = ()) -> Iterator[MockProcess]:
    """`python -m hermes_exp.mock` in its own process (so its CPU is not the runner's); `extra`: its options."""
    proc = subprocess.Popen([sys.executable, "-m", "hermes_exp.mock", "--port", "0",
                             "--latency-ms", str(latency_ms), *extra], stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip() if proc.stdout else ""
        if not url.startswith("http"):
            raise SystemExit(f"the mock server did not start (printed {url!r})")
        server = MockProcess(url)
        server.pid = proc.pid
        yield server
    finally:
        proc.terminate()
        proc.wait(10)


def write_prompts(path: Path, rows: Iterator[dict[str, Any]] | list[dict[str, Any]]) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    return path


def print_table(headers: list[str], rows: list[list[Any]]) -> None:
    """A markdown table (readable in a terminal, pasteable into RESULTS.md)."""
    cells = [[_fmt(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    print("| " + " | ".join(h.rjust(w) for h, w in zip(headers, widths)) + " |")
    print("|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|")
    for row in cells:
        print("| " + " | ".join(c.rjust(w) for c, w in zip(row, widths)) + " |")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)
