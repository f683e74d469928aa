"""What an invocation prints when it ends (the counts, the files, how to resume or retry) and the exit codes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hermes_exp.store import refilter
from hermes_exp.store.ledger import Ledger
from hermes_exp.store.metrics import summary_line

EXIT_OK, EXIT_TASK_ERRORS, EXIT_INTERRUPTED = 0, 3, 130


def exit_code(code: int, stats: dict[str, Any]) -> int:
    """The dispatch's code, else 3 when tasks failed."""
    return code if code != EXIT_OK or not stats["failed"] else EXIT_TASK_ERRORS


def say_outside(ledger: Ledger, samples: int, gone: int, narrowed: bool) -> None:
    """Why tasks of the ledger are left out: samples beyond samples_per_prompt, the invocation's narrower
    dataset selection, or rows that are no longer in the dataset."""
    beyond = min(gone, ledger.db.execute("SELECT COUNT(*) FROM tasks WHERE sample >= ?", [samples]).fetchone()[0])
    where = ("outside this invocation's dataset selection (dataset.slice, where, ids_file, max_samples) or no "
             "longer in the dataset") if narrowed else "no longer in the dataset (rows edited or removed)"
    for n, why in ((gone - beyond, where), (beyond, f"samples beyond samples_per_prompt={samples}")):
        if n:
            print(f"{n} task(s) in the ledger are {why}: kept in the ledger, left out of the outputs and "
                  "statistics", file=sys.stderr)


def summary(run_dir: Path, stats: dict[str, Any], ran: int, interrupted: bool,
            settings: dict[str, Any] | None = None) -> None:
    why = lambda counts: f" ({', '.join(f'{k}: {v}' for k, v in counts.items())})" if counts else ""  # noqa: E731
    samples = int(stats.get("samples_per_prompt") or 1)
    of = f"{stats['total_prompts']} prompts" if samples == 1 else \
        f"{stats['total_prompts']} tasks ({stats['total_prompts'] // samples} prompts x {samples} samples)"
    files = stats.get("exported") or {}
    written = ", ".join(f"{name}: {n}" for name, n in files.items() if name != "trajectories.jsonl")
    print(
        f"\n{stats['kept']} kept, {stats['filtered']} filtered{why(stats['discarded'])}, "
        f"{stats['failed']} failed{why(stats['errors'])}, "
        + (f"{stats['broken']} broken, " if stats.get("broken") else "") + f"{stats['pending']} pending "
        f"of {of} ({ran} planned now, {stats['api_calls']} model calls in all)\n"
        + (f"  by {refilter.describe(settings)}\n" if settings is not None else "")
        + f"  trajectories: {run_dir / 'trajectories.jsonl'}"
        + (f" ({files['trajectories.jsonl']} lines)" if "trajectories.jsonl" in files else "") + "\n"
        + (f"  also:         {written}\n" if written else "")
        + f"  statistics:   {run_dir / 'statistics.json'}\n"
        f"  ledger:       {run_dir / 'ledger.db'}", file=sys.stderr)
    if stats.get("verification"):
        print(summary_line(stats["verification"]), file=sys.stderr)
    if stats.get("broken"):
        print(broken_lines(stats), file=sys.stderr)
    if interrupted:
        print("interrupted: finished tasks are saved. To resume, run the same command again:\n  "
              + " ".join(["hermes-exp", *sys.argv[1:]]), file=sys.stderr)
    elif stats["failed"]:
        classes = ",".join(sorted(stats["errors"]))
        print(f"  some tasks failed ({classes}); the same command again retries the classes in "
              f"resume.retry_errors (default provider,sandbox); to retry all: resume.retry_errors=[{classes}]",
              file=sys.stderr)


def broken_lines(stats: dict[str, Any], tail_lines: int = 3) -> str:
    """The tasks preflight=oracle found broken, each with why and the end of its verifier's output."""
    listed = stats.get("broken_tasks") or []
    out = [f"  broken tasks (preflight=oracle): {stats['broken']}, never sent to the model and not in the pass "
           "rates; fix them and run the same command again (an edited task is checked again)"]
    for entry in listed[:20]:
        out.append(f"    {entry['why']}" + (f" (sample {entry['sample']})" if entry.get("sample") else ""))
        out += [f"      | {line}" for line in entry["tail"].strip().splitlines()[-tail_lines:]]
    if stats["broken"] > min(20, len(listed)):
        out.append(f"    ... {stats['broken'] - min(20, len(listed))} more in ledger.db (tasks.error_class = 'broken')")
    return "\n".join(out)
