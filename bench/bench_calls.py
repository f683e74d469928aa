"""Where a model call's runner CPU goes: the real CLI against an external mock model with fixed latency,
with thread CPU (time.thread_time) around the runner's functions, the cyclic collector's time (gc.callbacks)
and the process's CPU during the dispatch, per model call (the sixth pass of issue 15, bench/RESULTS.md).
`--trees` runs checkouts of hermes-exp in interleaved rounds (each through PYTHONPATH) for an A/B.

usage: python bench/bench_calls.py [-n 1024] [--workers 256] [--latency-ms 1000] [--trees DIR,DIR] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_runner import cli_args
from harness import THREAD_TIMED, mock_server, print_table, write_prompts

# (label, module, attribute path): wrapped with thread CPU per call; a module-level name is wrapped where
# it is looked up (run.ledger_row, encode.encode: the call's Body). The HTTP exchange runs on the process's
# event loop thread (model/transport.py): the session thread's time in Transport.post is its waiting.
TIMED = [("complete", "hermes_exp.model.client", "ModelClient.complete"),
         ("complete > post", "hermes_exp.model.transport", "Transport.post"),
         ("complete > encode", "hermes_exp.model.encode", "encode"),
         ("complete > _reply", "hermes_exp.model.client", "ModelClient._reply"),
         ("complete > limiter", "hermes_exp.model.ratelimit", "RateLimiter.acquire"),
         ("complete > limiter", "hermes_exp.model.ratelimit", "RateLimiter.release"),
         ("tool calls", "hermes_exp.tools.registry", "Registry.call"),
         ("session (run_task)", "hermes_exp.worker.task", "run_task"),
         ("ledger_row", "hermes_exp.run.dispatch", "ledger_row"),
         ("Ledger.record", "hermes_exp.store.ledger", "Ledger.record"),
         ("Ledger.mark_running", "hermes_exp.store.ledger", "Ledger.mark_running"),
         ("export", "hermes_exp.run.invocation", "export")]

WRAPPER = """
import atexit, gc, importlib, json, os, resource, runpy, sys, threading, time
""" + THREAD_TIMED + """
TIMED = json.loads(os.environ["HX_BENCH_TIMED"])
ACC, LOCK, GC, START = {}, threading.Lock(), {"cpu": 0.0, "full": 0.0}, threading.local()
def wrap(label, module, path):
    owner = importlib.import_module(module)
    *outer, name = path.split(".")
    for part in outer:
        owner = getattr(owner, part)
    def add(spent):
        with LOCK:
            ACC[label] = ACC.get(label, 0.0) + spent
    setattr(owner, name, _thread_timed(getattr(owner, name), add))
def collected(phase, info):
    if phase == "start":
        START.t = time.thread_time()
        return
    spent = time.thread_time() - getattr(START, "t", time.thread_time())
    GC["cpu"] += spent
    GC["full"] += spent if info["generation"] == 2 else 0.0
def dump():
    s = resource.getrusage(resource.RUSAGE_SELF)
    with open(os.environ["HX_BENCH_OUT"], "w") as f:
        json.dump({"acc": ACC, "gc": GC, "proc": s.ru_utime + s.ru_stime, "nvcsw": s.ru_nvcsw}, f)
atexit.register(dump)
gc.callbacks.append(collected)
import hermes_exp.cli.app, hermes_exp.run.invocation
for entry in TIMED:
    wrap(*entry)
runpy.run_module("hermes_exp.cli.app", run_name="__main__", alter_sys=True)
"""


def one_run(tree: str, args: argparse.Namespace, url: str, work: Path) -> dict[str, Any]:
    """One run of the CLI from `tree`: seconds per label, the collector's, the process's CPU."""
    run_dir = Path(tempfile.mkdtemp(prefix="calls-", dir=work))
    data = write_prompts(run_dir / "prompts.jsonl",
                         [{"prompt": f"Benchmark prompt {i}: count the words of this sentence"} for i in range(args.n)])
    out = run_dir / "usage.json"
    env = {**os.environ, "PYTHONPATH": tree, "HX_BENCH_OUT": str(out), "HX_BENCH_TIMED": json.dumps(TIMED)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    argv = cli_args(data, "calls", url, "local", args.workers, args.override)
    proc = subprocess.run([sys.executable, "-c", WRAPPER, *argv], cwd=run_dir, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0 or not out.exists():
        raise SystemExit(f"the run from {tree} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    stats = json.loads((run_dir / "outputs" / "calls" / "statistics.json").read_text())
    return {**json.loads(out.read_text()), "calls": stats["api_calls"]}


def table(runs: list[tuple[str, dict[str, Any]]]) -> list[list[Any]]:
    labels = list(dict.fromkeys(label for label, _, _ in TIMED))
    rows = [[label, *(1000 * r["acc"].get(label, 0.0) / r["calls"] for _, r in runs)] for label in labels]
    rows.append(["collector (of it full)", *(f"{1000 * r['gc']['cpu'] / r['calls']:.3f} "
                                             f"({1000 * r['gc']['full'] / r['calls']:.3f})" for _, r in runs)])
    rows.append(["process, all threads", *(1000 * r["proc"] / r["calls"] for _, r in runs)])
    rows.append(["voluntary switches", *(r["nvcsw"] / r["calls"] for _, r in runs)])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--prompts", dest="n", type=int, default=1024)
    parser.add_argument("--workers", type=int, default=256)
    parser.add_argument("--latency-ms", type=float, default=1000)
    parser.add_argument("--trees", default=str(Path(__file__).resolve().parent.parent),
                        help="comma-separated checkouts of hermes-exp, run in turn each round")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--override", action="append", default=[], help="extra Hydra overrides for every run")
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="hx-bench-calls-") as work, mock_server(args.latency_ms) as url:
        for round_ in range(1, args.rounds + 1):
            for tree in args.trees.split(","):
                load = os.getloadavg()[0]
                runs.append((f"{Path(tree).name} r{round_} (load {load:.1f})", one_run(tree, args, url, Path(work))))
    print(f"runner CPU per model call (ms; thread CPU inside each part; a > b: b inside a), {args.n} prompts, "
          f"{args.workers} sessions, mock latency {args.latency_ms:g} ms, sandbox=local; started {time.strftime('%H:%M')}")
    print_table(["part", *(name for name, _ in runs)], table(runs))


if __name__ == "__main__":
    main()
