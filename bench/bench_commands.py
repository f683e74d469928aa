"""The runner's own CPU per tool command on sandbox=local (issue 15: <= 0.5 ms besides the command itself),
in this process: `LocalSandbox.exec` of a short command with its factory's process records, as a session
runs it, timed with the calling thread's CPU clock (the command's own CPU is its own process's); then a
sandbox's open + close per task. Rounds run in one thread and on many threads at once (the GIL hand-offs
of a run with hundreds of sessions).

usage: python bench/bench_commands.py [--threads 1,64,256] [--commands 200] [--total 1000] [--rounds 3]
                                      [--command CMD]
Run it with PYTHONPATH=<another checkout> for an A/B against that code (same interpreter, same machine).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import threading
import time
from typing import Any

from hermes_exp.sandbox.local import LocalSandboxFactory
from hermes_exp.sandbox.reaper import registry_dir

RUN_ID = f"bench-cmd-{os.getpid()}"


def per_command(factory: LocalSandboxFactory, threads: int, commands: int, command: str) -> tuple[float, float, float]:
    """Mean thread CPU ms per exec, per open and per close, over `commands` commands per thread (one sandbox
    per thread, opened and closed around them, `commands // 5` times: a task's five tool calls)."""
    totals = {"exec": 0.0, "open": 0.0, "close": 0.0, "execs": 0, "boxes": 0}
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def session(n: int) -> None:
        spent = {"exec": 0.0, "open": 0.0, "close": 0.0}
        execs = boxes = 0
        start.wait()
        while execs < commands:
            t0 = time.thread_time()
            box = factory.open(f"bench:{n}-{boxes}", {})
            spent["open"] += time.thread_time() - t0
            for _ in range(min(5, commands - execs)):
                t0 = time.thread_time()
                result = box.exec(command, 30)
                spent["exec"] += time.thread_time() - t0
                if result.exit_code != 0:
                    raise SystemExit(f"{command!r} exited {result.exit_code}: {result.output}")
                execs += 1
            t0 = time.thread_time()
            box.close()
            spent["close"] += time.thread_time() - t0
            boxes += 1
        with lock:
            for key, value in spent.items():
                totals[key] += value
            totals["execs"] += execs
            totals["boxes"] += boxes

    workers = [threading.Thread(target=session, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return (1000 * totals["exec"] / totals["execs"], 1000 * totals["open"] / totals["boxes"],
            1000 * totals["close"] / totals["boxes"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,64,256", help="comma-separated thread counts")
    parser.add_argument("--commands", type=int, default=200, help="commands per thread and round (1 thread)")
    parser.add_argument("--total", type=int, default=1000, help="commands per round on many threads, in all")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--command", default="echo one two three | wc -w")
    args = parser.parse_args(argv)
    factory = LocalSandboxFactory(run_id=RUN_ID)
    factory.preflight()
    rows: list[list[Any]] = []
    try:
        per_command(factory, 1, 10, args.command)  # warm-up: imports, caches, the records' folder
        for threads in [int(t) for t in args.threads.split(",")]:
            # many threads: fewer commands each, --total in all per round (at least a task's 5 each)
            commands = args.commands if threads == 1 else max(5, -(-args.total // threads))
            rounds = [per_command(factory, threads, commands, args.command) for _ in range(args.rounds)]
            execs, opens, closes = zip(*rounds)
            rows.append([threads, commands * threads, " ".join(f"{x:.3f}" for x in execs), statistics.median(execs),
                         statistics.median(opens), statistics.median(closes)])
    finally:
        factory.shutdown()
        shutil.rmtree(registry_dir(RUN_ID), ignore_errors=True)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.command!r}")
    print("| threads | commands/round | exec ms (rounds) | exec ms | open ms | close ms |")
    print("|--:|--:|--|--:|--:|--:|")
    for row in rows:
        print("| " + " | ".join(f"{c:.3f}" if isinstance(c, float) else str(c) for c in row) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
