"""Thread CPU per tool call by tool, in this process, with no model: THREADS threads each run prompts' worth of
the mock model's plan with the terminal and file tools (a background command, process wait, terminal,
write_file, read_file, search_files), each prompt in its own sandbox, through Registry.call, with a short
sleep between calls standing for the model's turn (the eighth pass of issue 15, bench/RESULTS.md).
`PYTHONPATH=<checkout>` or another venv's python for an A/B.

usage: python bench/bench_tools.py [-n 256] [--threads 64] [--turn-ms 20] [--sandbox local]
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
import uuid
from typing import Any

from harness import print_table


def plan(k: int, i: int) -> list[tuple[str, str, dict[str, Any]]]:
    return [("terminal (background)", "terminal", {"command": "echo background job started; sleep 0.2; "
                                                   "echo background job done", "background": True}),
            ("process (wait)", "process", {"action": "wait", "session_id": "proc_000000000001", "timeout": 10}),
            ("terminal", "terminal", {"command": f"echo 'Benchmark prompt {k} {i}: count the words' | wc -w"}),
            ("write_file", "write_file", {"path": "notes.md", "content": f"# Notes\nBenchmark prompt {i}\n"}),
            ("read_file", "read_file", {"path": "notes.md"}),
            ("search_files", "search_files", {"pattern": "Notes"})]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--prompts", dest="n", type=int, default=256)
    parser.add_argument("--threads", type=int, default=64)
    parser.add_argument("--turn-ms", type=float, default=20, help="sleep before each call (the model's turn)")
    parser.add_argument("--sandbox", default="local", choices=["local", "bwrap"])
    args = parser.parse_args()

    from hermes_exp.tools.base import Resources
    from hermes_exp.tools.files import FileTool
    from hermes_exp.tools.process import Process
    from hermes_exp.tools.registry import Registry, Toolset
    from hermes_exp.tools.terminal import Terminal
    from hermes_exp.tools.toolbox import Toolbox

    if args.sandbox == "local":
        from hermes_exp.sandbox.local import LocalSandboxFactory as Factory
    else:
        from hermes_exp.sandbox.bwrap import BwrapSandboxFactory as Factory
    tools = {"terminal": Terminal(), "process": Process(),
             **{n: FileTool(n) for n in ("read_file", "write_file", "search_files")}}
    registry, offered = Registry([Toolset("bench", "", tools)]), list(tools)
    factory = Factory(run_id=f"bench-tools-{uuid.uuid4().hex[:8]}", output_limit=20000)
    limits = {"terminal_timeout": 60, "max_output_chars": 20000}
    spent: dict[str, list[float]] = {}
    lock = threading.Lock()

    def worker(k: int) -> None:
        for i in range(k, args.n, args.threads):
            sandbox = factory.open(f"v1:{uuid.uuid4().hex}", {})
            box = Toolbox(registry, sandbox, limits, Resources())
            try:
                for label, name, call_args in plan(k, i):
                    time.sleep(args.turn_ms / 1000)
                    start = time.thread_time()
                    box.call(name, json.dumps(call_args), offered)
                    cpu = time.thread_time() - start
                    with lock:
                        spent.setdefault(label, []).append(cpu)
            finally:
                box.close()
                sandbox.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(args.threads)]
    load = os.getloadavg()[0]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    factory.shutdown()
    rows = [[label, len(cpus), 1000 * sum(cpus) / len(cpus)] for label, cpus in spent.items()]
    every = [c for cpus in spent.values() for c in cpus]
    rows.append(["all", len(every), 1000 * sum(every) / max(len(every), 1)])
    print(f"{args.n} prompts on {args.threads} threads, sandbox={args.sandbox}, load at start {load:.1f}")
    print_table(["tool", "calls", "thread CPU ms/call"], rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
