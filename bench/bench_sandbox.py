"""Sandbox overhead: the median time of open + exec(`true`) + close per backend, and its ratio to
local. Targets (DESIGN.md): bubblewrap <= 20 ms, Docker <= 400 ms.

usage: python bench/bench_sandbox.py [-n 30] [--backends local,bwrap,docker] [--image IMAGE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

from hermes_exp.errors import SandboxError


def make_factory(backend: str, image: str) -> Any:
    run_id = f"bench-{os.getpid()}"
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
        factory.shutdown()
    return {name: statistics.median(values) for name, values in phases.items()}


def print_table(results: dict[str, dict[str, float]]) -> None:
    base = results.get("local", {}).get("total")
    print(f"{'backend':<8} {'open ms':>9} {'exec ms':>9} {'close ms':>9} {'total ms':>9} {'x local':>8}")
    for backend, r in results.items():
        ratio = f"{r['total'] / base:8.1f}" if base else f"{'-':>8}"
        print(f"{backend:<8} {r['open'] * 1e3:9.1f} {r['exec'] * 1e3:9.1f} {r['close'] * 1e3:9.1f} "
              f"{r['total'] * 1e3:9.1f} {ratio}")


def bench_runner_throughput(prompts: int = 100, max_sandboxes: tuple[int, ...] = (1, 4, 8)) -> None:
    """TODO(runner): run `prompts` prompts through the full runner (mock model, sandbox=docker) at
    each max_sandboxes value and report prompts/second. Needs the runner's programmatic entry point,
    which is being written now; until then this part of the benchmark is not implemented."""
    raise NotImplementedError("runner throughput benchmark: waiting for the runner's entry point")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--iterations", type=int, default=30)
    parser.add_argument("--backends", default="local,bwrap,docker")
    parser.add_argument("--image", default=os.environ.get("HX_TEST_IMAGE", "hermes-exp-test/busybox:latest"))
    args = parser.parse_args(argv)
    results: dict[str, dict[str, float]] = {}
    for backend in args.backends.split(","):
        try:
            results[backend] = time_backend(backend.strip(), args.iterations, args.image)
        except SandboxError as exc:
            print(f"{backend}: skipped: {exc}", file=sys.stderr)
    print(f"median of {args.iterations} rounds of open + exec(`true`) + close")
    print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
