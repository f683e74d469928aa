"""A resume with a few new rows over a large settled run: the run scans, plans, runs the new tasks against
the mock and exports (issue 15, incremental export). Interleaved A/B of two installs on copies of one
finished run (bench_runner.py's build_finished_run, made once in --workdir with the first install):
each install settles its own copy first (its full export; the outputs of the two are compared byte for
byte), then every round appends --new rows to each one's dataset and times the CLI (in place).

usage: python bench/bench_export.py --python BASE_PY --python NEW_PY [--tasks 100000] [--new 5] [--rounds 2]
                                    [--workdir DIR]
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import sqlite3
import statistics
import sys
from pathlib import Path

from bench_runner import build_finished_run
from harness import mock_server, print_table, run_cli


def _copy_run(src: Path, dst: Path) -> None:
    """A copy of a work dir: outputs are replaced by rename (never written in place), so hard links do; a
    hard link changes the file's ctime, so an export's index no longer takes the source's files for its own."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, copy_function=os.link)
    for path in [*dst.rglob("ledger.db*"), *dst.glob("*.jsonl")]:  # the ledger and the datasets change in place
        path.unlink()
        shutil.copy2(src / path.relative_to(dst), path)


def _argv(work: Path, argv: list[str]) -> list[str]:
    return [f"dataset.path={work / 'resume.jsonl'}" if a.startswith("dataset.path=") else a for a in argv]


def _compare(a: Path, b: Path) -> list[str]:
    names = sorted({p.name for p in a.iterdir() if p.is_file()} | {p.name for p in b.iterdir() if p.is_file()})
    outputs = [n for n in names if n.endswith(".jsonl") or n == "statistics.json"]
    return [n for n in outputs if not ((a / n).exists() and (b / n).exists() and filecmp.cmp(a / n, b / n, shallow=False))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", action="append", required=True, help="base, then new interpreter")
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--new", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args(argv)
    template = args.workdir / "template"
    with mock_server(0) as url:
        base_argv = [f"model.base_url={url}" if a.startswith("model.base_url=") else a for a in _template(template, args, url)]
        settled = []
        for n, python in enumerate(args.python):  # each install's own settled copy (its config snapshot too)
            work = args.workdir / f"settled_{n}"
            if not (work / "settled").exists():
                _copy_run(template, work)
                with sqlite3.connect(work / "outputs" / "resume" / "ledger.db") as db:  # this install exports it all
                    db.execute("DELETE FROM meta WHERE key = 'export_stamp'")
                for _ in range(2):  # the outputs of the finished run, then its no-op (the index, for an install that keeps one)
                    run = run_cli(work, _argv(work, base_argv), python=python)
                    if run.code != 0:
                        raise SystemExit(f"settling with {python} exited {run.code}:\n{run.stderr[-3000:]}")
                (work / "settled").touch()
            settled.append(work)
        differ = _compare(settled[0] / "outputs" / "resume", settled[1] / "outputs" / "resume")
        print(f"settled outputs of the two installs differ in: {differ or 'nothing'}", file=sys.stderr)
        rows: dict[int, list[list[float]]] = {0: [], 1: []}
        for r in range(args.rounds):
            for n in ((0, 1) if r % 2 == 0 else (1, 0)):
                # In place: a copy (even a hard link) is another file to the export's index (ctime, inode),
                # so each install's settled run grows by --new rows a round, as a user's run does.
                work = settled[n]
                with (work / "resume.jsonl").open("a") as fh:
                    for i in range(args.new):
                        fh.write(json.dumps({"prompt": f"New prompt {r}.{i}: count the words of this sentence"}) + "\n")
                load = Path("/proc/loadavg").read_text().split()[0]
                run = run_cli(work, _argv(work, base_argv), python=args.python[n])
                if run.code != 0:
                    raise SystemExit(f"round {r} of install {n} exited {run.code}:\n{run.stderr[-3000:]}")
                rows[n].append([run.self_cpu, run.wall, run.maxrss_mb, float(load)])
                told = [line for line in run.stderr.splitlines() if "export:" in line]
                print(f"round {r} install {n}: CPU {run.self_cpu:.2f} s, wall {run.wall:.2f} s, "
                      f"RSS {run.maxrss_mb:.1f} MB, load {load} {told}", file=sys.stderr)
    med = {n: [statistics.median(col) for col in zip(*rows[n])] for n in rows}
    print(f"\nresume with {args.new} new rows over {args.tasks} settled tasks, {args.rounds} rounds (medians)")
    print_table(["measure", "base", "new", "new/base"],
                [[name, med[0][i], med[1][i], med[1][i] / med[0][i]] for i, name in
                 enumerate(["CPU s", "wall s", "peak RSS MB"])])
    return 0


def _template(template: Path, args: argparse.Namespace, url: str) -> list[str]:
    """The finished run (built once); its CLI arguments."""
    saved = template / "argv.json"
    if not saved.exists():
        template.mkdir(parents=True, exist_ok=True)
        argv, _ = build_finished_run(template, args.tasks, url, "local", [])
        saved.write_text(json.dumps(argv))
    return json.loads(saved.read_text())


if __name__ == "__main__":
    sys.exit(main())
