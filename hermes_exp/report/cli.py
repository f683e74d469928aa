"""The `hermes-exp-report PATH` command: argument handling and error reporting only."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hermes_exp.errors import HermesExpError
from hermes_exp.report.render import DEFAULT_MAX_TRAJECTORIES, build_report


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hermes-exp-report",
        description="Write one self-contained HTML report (plots and a trajectory browser) for a run "
                    "directory, or for a sweep directory whose subdirectories are runs.")
    p.add_argument("path", type=Path, help="outputs/<run_name> (a run, or a -m sweep of runs)")
    p.add_argument("--summary", action="store_true",
                   help="instead of the HTML report: one row per run of PATH on the terminal, and "
                        "PATH/summary.json + PATH/summary.csv")
    p.add_argument("-o", "--output", type=Path, default=None, help="the HTML file to write (default: PATH/report.html)")
    p.add_argument("--max-trajectories", type=int, default=DEFAULT_MAX_TRAJECTORIES,
                   help=f"trajectories embedded in the browser, at most (default {DEFAULT_MAX_TRAJECTORIES})")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.max_trajectories < 1:
        parser().error("--max-trajectories must be at least 1")
    if args.summary:
        return _summary(args.path)
    try:
        out = build_report(args.path, args.output, args.max_trajectories)
    except HermesExpError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"report: {out}", file=sys.stderr)
    return 0


def _summary(path: Path) -> int:
    from hermes_exp.report.summary import find_jobs, summary

    if not find_jobs(path):
        print(f"error: {path} holds no finished runs (no statistics.json in it or its subdirectories)\n"
              "  fix: pass outputs/<run_name> of a run or of a -m sweep", file=sys.stderr)
        return 2
    print(summary(path), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
