"""What one file-tool operation costs the engine, archive API vs `docker exec`, per OCI runtime: in
`--sessions` containers at once, each op `--ops` times per container; latency (median) and the
engine's CPU per op (bench/engine_cpu.py). The ops: `write_file` and `read_file` as the sandbox does
them through the archive API (HEAD stat + put_archive; stat + get_archive), the same through one exec
each as the sandbox does them now (sandbox/docker_file_tools.py), a bare exec of `true` (what any exec
costs), and a container's whole life (open + close: create, start, remove; the removal waited for).

usage: python bench/bench_docker_files.py [--runtimes runc,crun] [--sessions 1,8] [--ops 20] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections import defaultdict
from typing import Any, Callable

from engine_cpu import EngineCpu

DATA = b"# Notes\ncount these words\n" * 4


def ops(api: Any, cid: str) -> dict[str, Callable[[], Any]]:
    """The sandbox's two ways of doing a file tool (docker_files: the archive API; docker_file_tools: one
    exec each, what the sandbox uses), and a bare exec through the same path."""
    from hermes_exp.sandbox import docker_file_tools as execs
    from hermes_exp.sandbox import docker_files as files

    return {
        "archive write": lambda: files.write_file(api, cid, "/task", "notes.md", DATA),
        "archive read": lambda: files.read_file(api, cid, "/task", "notes.md", 1 << 20),
        "exec write": lambda: execs.write_file(api, cid, "/task", "notes2.md", DATA),
        "exec read": lambda: execs.read_file(api, cid, "/task", "notes2.md", 1 << 20),
        "exec true": lambda: execs._run(api, cid, ["true"], None, None),
    }


def timed(sessions: int, n: int, engine: EngineCpu, op: Callable[[int], Any]) -> tuple[float, float]:
    """`op(session)` n times in each of `sessions` threads: (median seconds, engine CPU seconds per op)."""
    times: list[float] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        for _ in range(n):
            t0 = time.perf_counter()
            op(i)
            with lock:
                times.append(time.perf_counter() - t0)

    before = engine.read()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statistics.median(times), (engine.read() - before) / len(times)


def level(factory: Any, sessions: int, n: int, engine: EngineCpu) -> dict[str, tuple[float, float]]:
    result = {"open+close": timed(sessions, n, engine, lambda i: factory.open(f"v1:life{i}", {}).close())}
    boxes = [factory.open(f"v1:files{i}", {}) for i in range(sessions)]
    try:
        per_box = [ops(factory._api(), sb.container_id) for sb in boxes]
        for name in per_box[0]:
            result[name] = timed(sessions, n, engine, lambda i, name=name: per_box[i][name]())
        return result
    finally:
        for sb in boxes:
            sb.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtimes", default="runc,crun")
    parser.add_argument("--sessions", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8])
    parser.add_argument("--ops", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--image", default=os.environ.get("HX_TEST_IMAGE", "hermes-exp-test/busybox:latest"))
    args = parser.parse_args(argv)
    from hermes_exp.sandbox.docker import DockerSandboxFactory

    engine = EngineCpu()
    print(f"engine CPU from: {engine.source}; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    seen: dict[tuple[str, int, str], list[tuple[float, float]]] = defaultdict(list)
    runtimes = args.runtimes.split(",")
    for rnd in range(args.rounds):
        order = runtimes[rnd % len(runtimes):] + runtimes[:rnd % len(runtimes)]
        for runtime in order:
            factory = DockerSandboxFactory(image=args.image, run_id=f"bench-files-{os.getpid()}-{runtime}",
                                           max_sandboxes=max(args.sessions), runtime=runtime,
                                           remove_in_background=False)  # open+close: the removal counted
            factory.preflight({args.image})
            try:
                for n in args.sessions:
                    for name, got in level(factory, n, args.ops, engine).items():
                        seen[(runtime, n, name)].append(got)
            finally:
                factory.shutdown()
        print(f"round {rnd + 1} ({' -> '.join(order)}) done, load average {os.getloadavg()[0]:.1f}", flush=True)
    print(f"\nmedian over {args.rounds} round(s) of the per-round medians: latency ms, engine CPU ms per op")
    print(f"{'runtime':<8} {'sessions':>8} {'op':<14} {'latency ms':>11} {'engine CPU ms':>14}")
    for (runtime, n, name), got in seen.items():
        print(f"{runtime:<8} {n:>8} {name:<14} {statistics.median(g[0] for g in got) * 1e3:11.1f} "
              f"{statistics.median(g[1] for g in got) * 1e3:14.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
