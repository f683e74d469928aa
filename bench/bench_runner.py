"""Runner overhead: the real CLI against an external mock model with fixed latency, at several
concurrencies, and no-op invocations over large finished runs. Targets (issue 15): >= 0.9 of the ideal
(calls x latency / concurrency, over the dispatch window) at 64 sessions with 200 ms and at 256 with 1 s;
the runner's own CPU <= 1 ms per model call and <= 0.5 ms per tool call (besides the command itself);
peak RSS <= 150 MB at 1024 sessions; a no-op invocation <= 1 s on 1k tasks and <= 2 s on 100k.

usage: python bench/bench_runner.py [-n 200] [--concurrency 4,16,64] [--latency-ms 200] [--sandbox local] [--plan two|full]
                                    [--resume-tasks 1000,100000 | --resume-tasks 0] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import Invocation, mock_server, print_table, run_cli, write_prompts

TEMPLATE_MARK = "TEMPLATEX"


def cli_args(data: Path, run_name: str, base_url: str, sandbox: str, workers: int, extra: list[str]) -> list[str]:
    return [f"dataset.path={data}", f"run_name={run_name}", f"model.base_url={base_url}", f"sandbox={sandbox}",
            f"num_workers={workers}", "distribution=terminal_only", *extra]


def prompt_row(i: int, plan: str) -> dict[str, str]:
    """`two`: one command, then the answer (2 model calls, issue 31's setting); `full`: the mock's default plan
    over terminal_only's tools (4 tool calls + the answer: 5 model calls, the earlier passes' setting)."""
    if plan == "two":
        return {"prompt": f"Benchmark prompt {i}: count the words.\nRUN: echo benchmark prompt {i} | wc -w"}
    return {"prompt": f"Benchmark prompt {i}: count the words of this sentence"}


def dispatch_window(run_dir: Path) -> float:
    """First task start to last task end, from the ledger: the run without process start and export."""
    with sqlite3.connect(run_dir / "ledger.db") as conn:
        first, last = conn.execute("SELECT MIN(started_at), MAX(finished_at) FROM tasks").fetchone()
    return last - first


def bench_throughput(work: Path, args: argparse.Namespace) -> list[list[Any]]:
    data = write_prompts(work / "throughput.jsonl", [prompt_row(i, args.plan) for i in range(args.n)])
    latency = args.latency_ms / 1000
    rows = []
    with mock_server(args.latency_ms) as url:
        for workers in args.concurrency:
            run_name = f"throughput_c{workers}"
            argv = cli_args(data, run_name, url, args.sandbox, workers, args.override)
            mock_cpu = url.cpu_seconds()
            run = run_cli(work, argv, python=args.python)
            mock_cpu = url.cpu_seconds() - mock_cpu
            if run.code != 0:
                raise SystemExit(f"the run at concurrency {workers} exited {run.code}:\n{run.stderr[-3000:]}")
            noop = run_cli(work, argv, python=args.python)  # the same command again: nothing to run; its CPU is the fixed cost
            stats = json.loads((work / "outputs" / run_name / "statistics.json").read_text())
            calls = stats["api_calls"]
            if calls != args.n * (2 if args.plan == "two" else 5):
                print(f"warning: {calls} model calls, expected {2 if args.plan == 'two' else 5} per prompt", file=sys.stderr)
            window = dispatch_window(work / "outputs" / run_name)
            ideal = calls * latency / workers
            bound = math.ceil(args.n / workers) * (calls / args.n) * latency  # sequential calls per prompt
            marginal = run.self_cpu - noop.self_cpu
            per_tool = 1000 * run.tool_cpu / run.tool_calls if run.tool_calls else 0.0
            rows.append([workers, calls, run.tool_calls, run.wall, window, ideal, ideal / window, bound / window,
                         1000 * run.self_cpu / args.n, 1000 * marginal / args.n,
                         1000 * (marginal - run.tool_cpu) / calls, per_tool,
                         1000 * run.children_cpu / args.n, 1000 * (run.self_cpu + run.children_cpu) / calls,
                         1000 * mock_cpu / args.n, run.maxrss_mb])
    return rows


def _compose(overrides: list[str], run_dir: Path) -> dict[str, Any]:
    """The settings the CLI composes for these overrides (Hydra's compose API, as the tests do)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from hermes_exp.settings.paths import config_dir, register_resolvers
    from hermes_exp.settings.resolved import to_plain

    register_resolvers()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir()), version_base=None):
        cfg = compose(config_name="config", overrides=[*overrides, f"run_dir={run_dir}"])
    return to_plain(cfg)


def build_finished_run(work: Path, tasks: int, url: str, sandbox: str, extra: list[str]) -> tuple[list[str], dict]:
    """A dataset of `tasks` rows and a ledger in which every one is done, with realistic results: a
    small real run provides a finished result, which is copied for each row under its own key."""
    from hermes_exp.dataset.tasks import open_dataset, scan
    from hermes_exp.store.rows import ledger_row
    from hermes_exp.worker.result import TaskResult
    from hermes_exp.settings.resolved import identity_config, identity_hash
    from hermes_exp.store.ledger import Ledger

    template_data = write_prompts(work / "template.jsonl",
                                  [{"prompt": f"Resume prompt {TEMPLATE_MARK}: count the words of this sentence"}])
    template = run_cli(work, cli_args(template_data, "resume_template", url, sandbox, 1, extra))
    if template.code != 0:
        raise SystemExit(f"the template run exited {template.code}:\n{template.stderr[-3000:]}")
    with sqlite3.connect(work / "outputs" / "resume_template" / "ledger.db") as conn:
        template_result = conn.execute("SELECT result FROM tasks WHERE state = 'done'").fetchone()[0]

    data = write_prompts(work / "resume.jsonl", ({"prompt": f"Resume prompt {i}: count the words of this sentence"}
                                                 for i in range(tasks)))
    argv = cli_args(data, "resume", url, sandbox, 4, extra)
    run_dir = work / "outputs" / "resume"
    settings = _compose(argv, run_dir)
    identity = identity_hash(settings)
    found = scan(open_dataset(data), identity, False, None)
    ledger = Ledger(run_dir / "ledger.db")
    try:
        ledger.claim_identity(identity, identity_config(settings))
        ledger.start_invocation()
        for index, key, _ in found.indexed:
            result = json.loads(template_result.replace(TEMPLATE_MARK, str(index)))
            result.update(key=key, index=index)
            ledger.mark_running(key, index, result["row"]["prompt"])  # as the runner does at dispatch
            ledger.record(ledger_row(TaskResult.from_dict(result), []), int(settings["batch_size"]))
    finally:
        ledger.close()
    return argv, settings


def time_planning(data: Path, run_dir: Path, settings: dict[str, Any]) -> tuple[float, float, int]:
    """In this process: scan + ledger states + pending (the planning), and the export a run ends with."""
    from hermes_exp.dataset.tasks import open_dataset, scan
    from hermes_exp.run.plan import intent, pending
    from hermes_exp.settings.resolved import identity_hash
    from hermes_exp.store.export import export
    from hermes_exp.store.formats import chosen_formats
    from hermes_exp.store.samples import selection_mode
    from hermes_exp.store.ledger import Ledger

    t0 = time.perf_counter()
    found = scan(open_dataset(data), identity_hash(settings), False, None)
    ledger = Ledger(run_dir / "ledger.db")
    todo = pending(found.indexed, ledger.states(), intent(settings))
    t1 = time.perf_counter()
    export(ledger, run_dir, settings, chosen_formats(settings), selection_mode(settings))
    t2 = time.perf_counter()
    ledger.close()
    return t1 - t0, t2 - t1, len(todo)


def bench_resume(work: Path, args: argparse.Namespace, tasks: int) -> list[Any]:
    work = work / f"resume_{tasks}"
    work.mkdir(parents=True, exist_ok=True)
    with mock_server(0) as url:
        t0 = time.perf_counter()
        argv, settings = build_finished_run(work, tasks, url, args.sandbox, args.override)
        print(f"built a finished run of {tasks} tasks in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        first = run_cli(work, argv, python=args.python)  # writes the outputs of the finished run (as the last real run would have)
        second = run_cli(work, argv, python=args.python)
    for run in (first, second):
        if run.code != 0 or "nothing to run" not in run.stderr:
            raise SystemExit(f"the resume invocation exited {run.code} or ran something:\n{run.stderr[-3000:]}")
    planning, exporting, todo = time_planning(work / "resume.jsonl", work / "outputs" / "resume", settings)
    assert todo == 0
    return [tasks, second.wall, second.startup, second.wall - second.startup, planning, exporting,
            second.self_cpu, second.maxrss_mb]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--prompts", dest="n", type=int, default=200)
    parser.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[4, 16, 64],
                        help="num_workers values, comma-separated (default 4,16,64)")
    parser.add_argument("--latency-ms", type=float, default=200)
    parser.add_argument("--plan", choices=["two", "full"], default="two",
                        help="two: one command then the answer (2 model calls per prompt); full: the mock's default "
                        "plan (5 calls: 4 tool calls + the answer), as measured before issue 31")
    parser.add_argument("--sandbox", default="local", help="local, bwrap or docker")
    parser.add_argument("--override", action="append", default=[],
                        help="extra CLI override, repeatable (e.g. sandbox.image=busybox:latest)")
    parser.add_argument("--resume-tasks", type=lambda s: [int(x) for x in s.split(",") if int(x)],
                        default=[1000, 100_000], help="finished-run sizes, comma-separated (default 1000,100000); "
                        "0 skips the no-op benchmark")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter that runs the runner (e.g. a venv without the dev extras)")
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temporary directory")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hx-bench-") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if not args.skip_throughput:
            rows = bench_throughput(work, args)
            print(f"\nthroughput: {args.n} prompts, mock latency {args.latency_ms:g} ms, sandbox={args.sandbox}; "
                  "targets: ideal/window >= 0.9, <= 1 ms CPU per model call and <= 0.5 ms per tool call, "
                  "RSS <= 150 MB")
            print("CPU ms/tool call: the runner's CPU inside tool calls (thread CPU: spawn, pipes, result), the "
                  "command's own excluded; CPU ms/model call: the marginal CPU (run minus a no-op re-run) "
                  "less that, per model call (parent and workers); tree CPU ms/model call: everything the command's process "
                  "tree used (runner, workers, tool commands, start-up and export) / model calls (issue 31's figure)")
            print_table(["workers", "calls", "tool calls", "wall s", "window s", "ideal s", "ideal/window",
                         "bound/window", "own CPU ms/prompt", "marginal ms/prompt", "CPU ms/model call",
                         "CPU ms/tool call", "commands CPU ms/prompt", "tree CPU ms/model call", "mock CPU ms/prompt",
                         "peak RSS MB"], rows)
        if args.resume_tasks:
            rows = [bench_resume(work, args, tasks) for tasks in args.resume_tasks]
            print("\nno-op: a second invocation over a finished run; targets: <= 1 s on 1k tasks, <= 2 s on 100k")
            print_table(["tasks", "wall s", "startup s", "after startup s", "planning s", "export s",
                         "CPU s", "peak RSS MB"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
