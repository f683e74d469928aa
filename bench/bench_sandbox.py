"""Sandbox overhead: the median time of open + exec(`true`) + close per backend, and its ratio to
local. Targets (DESIGN.md): bubblewrap <= 20 ms, Docker <= 400 ms. Then the whole runner (real CLI,
external mock model) with sandbox=docker at several sandbox.max_sandboxes caps.

usage: python bench/bench_sandbox.py [-n 30] [--backends local,bwrap,docker] [--image IMAGE]
           [--runner-prompts 100 | --runner-prompts 0] [--max-sandboxes 1,4,8] [--workers 8] [--latency-ms 200]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hermes_exp.errors import SandboxError
from hermes_exp.sandbox.reaper import registry_dir


RUN_ID = f"bench-{os.getpid()}"  # the factories' process records live under registry_dir(RUN_ID)


def make_factory(backend: str, image: str) -> Any:
    run_id = RUN_ID
    if backend == "local":
        from hermes_exp.sandbox.local import LocalSandboxFactory

        return LocalSandboxFactory(run_id=run_id)
    if backend == "bwrap":
        from hermes_exp.sandbox.bwrap import BwrapSandboxFactory

        return BwrapSandboxFactory(run_id=run_id)
    if backend == "docker":
        from hermes_exp.sandbox.docker import DockerSandboxFactory

        return DockerSandboxFactory(image=image, run_id=run_id)
    raise SystemExit(f"unknown backend {backend!r}: choose from local, bwrap, docker")


def shut_down(factory: Any) -> None:
    """The factory's shutdown, then what a run's watchdog does at its end: its records' folder goes."""
    factory.shutdown()
    shutil.rmtree(registry_dir(RUN_ID), ignore_errors=True)


def time_backend(backend: str, n: int, image: str) -> dict[str, float]:
    """Median seconds of each phase over n rounds, after one warm-up round (engine checks, caches)."""
    factory = make_factory(backend, image)
    if hasattr(factory, "preflight"):
        factory.preflight({image} if backend == "docker" else set())
    phases: dict[str, list[float]] = {"open": [], "exec": [], "close": [], "total": []}
    try:
        for i in range(n + 1):
            t0 = time.perf_counter()
            sb = factory.open(f"v1:bench{i}", {})
            t1 = time.perf_counter()
            result = sb.exec("true", timeout=30)
            t2 = time.perf_counter()
            sb.close()
            t3 = time.perf_counter()
            if result.exit_code != 0:
                raise SystemExit(f"{backend}: `true` failed: {result.output}")
            if i:
                for name, value in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t3 - t0)):
                    phases[name].append(value)
    finally:
        shut_down(factory)
    return {name: statistics.median(values) for name, values in phases.items()}


def print_table(results: dict[str, dict[str, float]]) -> None:
    base = results.get("local", {}).get("total")
    print(f"{'backend':<8} {'open ms':>9} {'exec ms':>9} {'close ms':>9} {'total ms':>9} {'x local':>8}")
    for backend, r in results.items():
        ratio = f"{r['total'] / base:8.1f}" if base else f"{'-':>8}"
        print(f"{backend:<8} {r['open'] * 1e3:9.1f} {r['exec'] * 1e3:9.1f} {r['close'] * 1e3:9.1f} "
              f"{r['total'] * 1e3:9.1f} {ratio}")


def bench_runner_throughput(prompts: int, max_sandboxes: list[int], workers: int, latency_ms: float,
                            image: str, overrides: list[str] = ()) -> list[list[Any]]:
    """`prompts` prompts through the real CLI (external mock model, sandbox=docker, `workers` sessions)
    at each sandbox.max_sandboxes: a container is held for a whole prompt, so the cap bounds concurrency."""
    from harness import mock_server, run_cli, write_prompts

    rows: list[list[Any]] = []
    with tempfile.TemporaryDirectory(prefix="hx-bench-sandbox-") as tmp, mock_server(latency_ms) as url:
        work = Path(tmp)
        data = write_prompts(work / "p.jsonl", [{"prompt": f"Sandbox benchmark {i}: count the words"}
                                                for i in range(prompts)])
        base = None
        for cap in max_sandboxes:
            run_name = f"docker_cap{cap}"
            run = run_cli(work, [f"dataset.path={data}", f"run_name={run_name}", f"model.base_url={url}",
                                 "sandbox=docker", f"sandbox.image={image}", f"sandbox.max_sandboxes={cap}",
                                 f"num_workers={workers}", "distribution=terminal_only", *overrides])
            if run.code != 0:
                raise SystemExit(f"the docker run at max_sandboxes={cap} exited {run.code}:\n{run.stderr[-3000:]}")
            out = work / "outputs" / run_name
            calls = json.loads((out / "statistics.json").read_text())["api_calls"]
            with sqlite3.connect(out / "ledger.db") as conn:
                first, last = conn.execute("SELECT MIN(started_at), MAX(finished_at) FROM tasks").fetchone()
            window = last - first
            base = base or window  # the first cap's window
            slots = min(cap, workers)
            ideal = calls * latency_ms / 1000 / slots  # model time only: no sandbox overhead at all
            # what one slot spends per prompt beyond waiting for the model (container start, tool
            # commands, removal), assuming every slot is busy for the whole window
            overhead = window * slots / prompts - calls / prompts * latency_ms / 1000
            rows.append([cap, calls, run.wall, window, prompts / window, base / window, ideal / window,
                         1000 * overhead])
    return rows


def print_runner_table(rows: list[list[Any]], prompts: int, workers: int, latency_ms: float) -> None:
    print(f"\nrunner with sandbox=docker: {prompts} prompts, num_workers={workers}, mock latency {latency_ms:g} ms"
          "\n(window: first task start to last task end; ideal: model time only, calls x latency / slots;"
          "\n overhead: slot time per prompt beyond model calls: container start, tool commands, removal)")
    print(f"{'max_sandboxes':>13} {'calls':>6} {'wall s':>8} {'window s':>9} {'prompts/s':>10} "
          f"{'x cap=' + str(rows[0][0]) if rows else '':>8} {'ideal/window':>13} {'overhead ms/prompt':>19}")
    for cap, calls, wall, window, rate, speedup, ratio, overhead in rows:
        print(f"{cap:>13} {calls:>6} {wall:8.1f} {window:9.1f} {rate:10.2f} {speedup:8.2f} {ratio:13.2f} "
              f"{overhead:19.0f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--iterations", type=int, default=30)
    parser.add_argument("--backends", default="local,bwrap,docker")
    parser.add_argument("--image", default=os.environ.get("HX_TEST_IMAGE", "hermes-exp-test/busybox:latest"))
    parser.add_argument("--runner-prompts", type=int, default=100, help="0 skips the runner benchmark")
    parser.add_argument("--max-sandboxes", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4, 8])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--latency-ms", type=float, default=200)
    parser.add_argument("--override", action="append", default=[],
                        help="extra CLI override for the runner, repeatable (e.g. sandbox.max_starts_per_second=10)")
    args = parser.parse_args(argv)
    results: dict[str, dict[str, float]] = {}
    for backend in args.backends.split(","):
        try:
            results[backend] = time_backend(backend.strip(), args.iterations, args.image)
        except SandboxError as exc:
            print(f"{backend}: skipped: {exc}", file=sys.stderr)
    print(f"median of {args.iterations} rounds of open + exec(`true`) + close")
    print_table(results)
    if args.runner_prompts:
        rows = bench_runner_throughput(args.runner_prompts, args.max_sandboxes, args.workers, args.latency_ms,
                                       args.image, args.override)
        print_runner_table(rows, args.runner_prompts, args.workers, args.latency_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
