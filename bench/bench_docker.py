"""Where a docker sandbox's time goes under concurrency: `--sessions` threads each run `--prompts`
prompts' sandbox work (open, the terminal_only workload's tool calls: an exec, write_file, read_file, a
grep exec; close) straight through `DockerSandboxFactory`, with no model in between. Reports the sandbox
time per prompt (what a session waits for beyond the model: the issue's "overhead") and, per engine API
call, how many were made per prompt and their mean latency (the SDK's `APIClient` methods, timed).
Also the CPU per prompt of the engine (bench/engine_cpu.py: its cpuacct group when it has one) and of
this process (the sessions' client side): less dependent on the machine's load than latencies are,
though a shared engine's CPU includes whatever else uses it meanwhile.

usage: python bench/bench_docker.py [--sessions 1,8,32] [--prompts 64] [--image IMAGE]
           [--override key=value ...]   (factory settings, e.g. warm_pool=8 max_starts_per_second=10)
       python bench/bench_docker.py --variant NAME=k=v,k=v --variant NAME2=... [--rounds 3]
           (variants interleaved in rotating order, medians over the rounds, the load average per round)
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import statistics
import sys
import threading
import time
from collections import defaultdict
from typing import Any

from engine_cpu import EngineCpu

LEVELS = itertools.count()
CALLS = ("create_container", "start", "remove_container", "exec_create", "exec_start", "exec_inspect",
         "get_archive", "put_archive", "inspect_container", "containers", "kill", "stop", "wait")


class CallTimes:
    """Wraps the SDK's APIClient methods to count and time them (every thread)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.times: dict[str, list[float]] = defaultdict(list)
        self._saved: dict[str, Any] = {}

    def install(self) -> None:
        from docker.api.client import APIClient

        for name in CALLS:
            inner = getattr(APIClient, name)
            self._saved[name] = inner
            setattr(APIClient, name, self._wrap(name, inner))

    def _wrap(self, name: str, inner: Any) -> Any:
        @functools.wraps(inner)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                with self.lock:
                    self.times[name].append(time.perf_counter() - t0)
        return timed

    def reset(self) -> None:
        with self.lock:
            self.times.clear()


def one_prompt(factory: Any, key: str) -> float:
    """The sandbox part of one terminal_only prompt; returns its seconds."""
    t0 = time.perf_counter()
    sb = factory.open(key, {})
    try:
        assert sb.exec("echo 'count these words' | wc -w", timeout=30).exit_code == 0
        sb.write_file("notes.md", b"# Notes\ncount these words\n")
        assert b"Notes" in sb.read_file("notes.md")
        assert sb.exec("grep -rn -- Notes . | head -200", timeout=30).exit_code == 0
    finally:
        sb.close()
    return time.perf_counter() - t0


def run_level(sessions: int, prompts: int, image: str, settings: dict[str, Any], calls: CallTimes,
              engine: EngineCpu) -> dict:
    from hermes_exp.sandbox.docker import DockerSandboxFactory

    factory = DockerSandboxFactory(image=image, run_id=f"bench-dock-{os.getpid()}-{sessions}-{next(LEVELS)}",
                                   max_sandboxes=sessions, **settings)
    factory.preflight({image})
    one_prompt(factory, "v1:warmup")
    time.sleep(float(settings.get("warm_pool") or 0) and 2.0)  # let a warm pool fill, as a run's start-up does
    calls.reset()
    todo = iter(range(prompts))
    lock, spent = threading.Lock(), []

    def session() -> None:
        while True:
            with lock:
                i = next(todo, None)
            if i is None:
                return
            took = one_prompt(factory, f"v1:bench{i}")
            with lock:
                spent.append(took)

    t0, cpu0, engine0 = time.perf_counter(), time.process_time(), engine.read()
    threads = [threading.Thread(target=session) for _ in range(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    factory.shutdown()  # in the wall time: what is still queued for removal is the level's work too
    wall = time.perf_counter() - t0
    return {"sessions": sessions, "wall": wall, "mean": statistics.mean(spent), "median": statistics.median(spent),
            "prompts_per_s": prompts / wall, "engine_cpu": (engine.read() - engine0) / prompts,
            "client_cpu": (time.process_time() - cpu0) / prompts,
            "calls": {k: (len(v) / prompts, statistics.mean(v)) for k, v in sorted(calls.times.items())}}


def parse_value(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def parse_settings(text: str) -> dict[str, Any]:
    """`k=v,k=v` -> factory settings ("" = the defaults)."""
    return {k: parse_value(v) for k, v in (o.split("=", 1) for o in text.split(",") if o)}


def print_levels(results: list[dict]) -> None:
    print(f"{'sessions':>8} {'wall s':>7} {'prompts/s':>9} {'sandbox ms/prompt mean':>23} {'median':>7} "
          f"{'engine CPU ms/prompt':>21} {'client CPU ms/prompt':>21}")
    for r in results:
        print(f"{r['sessions']:>8} {r['wall']:7.1f} {r['prompts_per_s']:9.2f} {r['mean'] * 1e3:23.0f} "
              f"{r['median'] * 1e3:7.0f} {r['engine_cpu'] * 1e3:21.0f} {r['client_cpu'] * 1e3:21.0f}")
    for r in results:
        print(f"\n{r['sessions']} sessions: engine calls per prompt, mean ms")
        for name, (per, mean) in r["calls"].items():
            print(f"  {name:<18} {per:5.2f} x {mean * 1e3:8.1f} ms = {per * mean * 1e3:8.1f} ms/prompt")


def interleave(variants: dict[str, dict[str, Any]], rounds: int, sessions: list[int], prompts: int, image: str,
               calls: CallTimes, engine: EngineCpu) -> None:
    """Every variant at every level, `rounds` times in rotating order (a shared machine's load drifts:
    no variant always runs first); then the medians over the rounds, and each round's load average."""
    seen: dict[tuple[str, int], list[dict]] = defaultdict(list)
    names = list(variants)
    for rnd in range(rounds):
        order = names[rnd % len(names):] + names[:rnd % len(names)]
        print(f"round {rnd + 1}: {' -> '.join(order)}, load average {os.getloadavg()[0]:.1f}", flush=True)
        for name in order:
            for n in sessions:
                r = run_level(n, prompts, image, variants[name], calls, engine)
                seen[(name, n)].append(r)
                print(f"  {name:<12} {n:>3} sessions: {r['median'] * 1e3:6.0f} ms/prompt median, "
                      f"{r['prompts_per_s']:5.2f} prompts/s, engine CPU {r['engine_cpu'] * 1e3:5.0f} ms/prompt, "
                      f"client CPU {r['client_cpu'] * 1e3:4.0f}, load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"\nmedian over {rounds} round(s): sandbox ms per prompt (median), prompts/s; load now "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'variant':<12} {'sessions':>8} {'ms/prompt':>10} {'prompts/s':>10} {'engine CPU ms':>14} "
          f"{'client CPU ms':>14}")
    for (name, n), rs in seen.items():
        print(f"{name:<12} {n:>8} {statistics.median(r['median'] for r in rs) * 1e3:10.0f} "
              f"{statistics.median(r['prompts_per_s'] for r in rs):10.2f} "
              f"{statistics.median(r['engine_cpu'] for r in rs) * 1e3:14.0f} "
              f"{statistics.median(r['client_cpu'] for r in rs) * 1e3:14.0f}")
    for (name, n), rs in seen.items():
        print(f"\n{name}, {n} sessions, last round: engine calls per prompt, mean ms")
        for call, (per, mean) in rs[-1]["calls"].items():
            print(f"  {call:<18} {per:5.2f} x {mean * 1e3:8.1f} ms = {per * mean * 1e3:8.1f} ms/prompt")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 32])
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--image", default=os.environ.get("HX_TEST_IMAGE", "hermes-exp-test/busybox:latest"))
    parser.add_argument("--override", nargs="*", default=[], help="factory settings key=value")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=k=v,k=v",
                        help="compare variants (repeatable), interleaved over --rounds")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engine-cpuacct", default=None, metavar="DIR",
                        help="the engine's cgroup-v1 cpuacct group (default: the group dockerd is in, if not the root)")
    args = parser.parse_args(argv)
    calls = CallTimes()
    calls.install()
    engine = EngineCpu(group=args.engine_cpuacct)
    print(f"engine CPU from: {engine.source}; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.variant:
        variants = {v.split("=", 1)[0]: parse_settings(v.partition("=")[2]) for v in args.variant}
        print(f"{args.prompts} prompts per level; variants {variants}")
        interleave(variants, args.rounds, args.sessions, args.prompts, args.image, calls, engine)
        return 0
    settings = {k: parse_value(v) for k, v in (o.split("=", 1) for o in args.override)}
    print(f"{args.prompts} prompts per level; settings {settings or 'default'}")
    print_levels([run_level(n, args.prompts, args.image, settings, calls, engine) for n in args.sessions])
    return 0


if __name__ == "__main__":
    sys.exit(main())
