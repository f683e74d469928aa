"""`preflight=oracle`: before any model call, each distinct environment of the tasks about to run is checked
once (its reference solution, then its verifier, in a fresh sandbox: worker/environment.py). A task whose
environment is broken is recorded as error class `broken`, never sent to the model, and the run goes on
with the rest. Verdicts are kept in the ledger by the environment's content key, so an unchanged
environment is not checked again; a task edited to fix it has a new key, is checked again, and runs."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Any

from hermes_exp.dataset.readers import dataset_base_dir
from hermes_exp.dataset.tasks import Scan, Slot, Task, canonical_json, stream_tasks
from hermes_exp.errors import BROKEN, BrokenTask
from hermes_exp.sandbox.images import content_digest
from hermes_exp.settings.run_options import preflight
from hermes_exp.store import environments as kept
from hermes_exp.store.ledger import Ledger
from hermes_exp.store.rows import ledger_row
from hermes_exp.verify import registry
from hermes_exp.verify.scoring import Scorer
from hermes_exp.worker.result import TaskResult

ENV_SCHEME = "env1"
NOT_ENVIRONMENT = ("prompt", "id")  # what the agent is asked, and the row's name: not its environment
FOLDER_FIELDS = ("files", "tests", "solution_files")  # given as a folder path, their content counts


class EnvKeys:
    """An environment's content key: the row without its prompt and name, the folders it names, the
    verifier it gets and the sandbox it runs in (a Harbor task's row holds its folder's digest)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.scorer = Scorer(settings)
        self.sandbox = settings.get("sandbox") or {}
        self.base = Path(dataset_base_dir(settings.get("dataset")) or ".")
        self._digests: dict[Path, Any] = {}

    def __call__(self, row: dict[str, Any]) -> str:
        try:
            verifier = registry.effective(self.scorer.options, self.scorer.chosen, row)
        except Exception:  # noqa: BLE001 - a row the verifier refuses: its check says so
            verifier = None
        content = {"row": {k: v for k, v in row.items() if k not in NOT_ENVIRONMENT}, "verifier": verifier,
                   "sandbox": self.sandbox, "folders": {f: self._folder(row[f]) for f in FOLDER_FIELDS
                                                        if isinstance(row.get(f), str)}}
        digest = hashlib.blake2b(canonical_json(content).encode(), digest_size=16).hexdigest()
        return f"{ENV_SCHEME}:{digest}"

    def _folder(self, where: str) -> str:
        path = Path(where) if Path(where).is_absolute() else self.base / where
        if path.is_dir():
            return content_digest(path, self._digests)
        return hashlib.blake2b(path.read_bytes()).hexdigest() if path.is_file() else "missing"


def screen(executor: Any, settings: dict[str, Any], ledger: Ledger, found: Scan, todo: list[Slot]) -> list[Slot]:
    """Check the environments of `todo` (those the ledger has no verdict on), record its broken tasks and
    return the rest. A check that could not run (the engine, an image build) leaves its tasks to run."""
    if preflight(settings) != "oracle" or not todo or (settings.get("agent") or {}).get("kind", "model") != "model":
        return todo
    from hermes_exp.worker.environment import check_environment  # only a run that checks needs it

    keys = EnvKeys(settings)
    first: dict[str, Task] = {}  # env -> the first of its tasks (the row it is checked with)
    env_of: dict[str, str] = {}
    for task in stream_tasks(found, todo):
        env_of[task.key] = env = keys(task.row)
        first.setdefault(env, Task(env, task.index, task.row))
    known = kept.verdicts(ledger, list(first))
    fresh = [task for env, task in first.items() if env not in known]
    print(f"preflight=oracle: {len(first)} environment(s) for {len(todo)} task(s): checking {len(fresh)}"
          + (f", {len(known)} checked by an earlier run (ledger)" if known else ""), file=sys.stderr)
    for check in executor.map_unordered(check_environment, settings, fresh):
        name = task_name(first[check.env])
        kept.keep(ledger, check.env, check.verdict, check.why, check.tail, name, check.seconds)
        known[check.env] = {"verdict": check.verdict, "why": check.why, "tail": check.tail, "task": name}
    say(first, known)
    broken = [slot for slot in todo if known.get(env_of[slot.key], {}).get("verdict") == BROKEN]
    record_broken(ledger, settings, found, broken, {k: known[env_of[k]] for k in (s.key for s in broken)})
    gone = {slot.key for slot in broken}
    return [slot for slot in todo if slot.key not in gone]


def task_name(task: Task) -> str:
    """How a person finds the task: its id (a Harbor task's folder), else its dataset line."""
    name = task.row.get("id")
    return str(name) if isinstance(name, (str, int)) and str(name) else f"dataset line {task.index + 1}"


def record_broken(ledger: Ledger, settings: dict[str, Any], found: Scan, broken: list[Slot],
                  verdicts: dict[str, dict[str, Any]]) -> None:
    """Each broken task's ledger row: error class `broken`, no model call, the verifier's output tail."""
    for task in stream_tasks(found, broken):
        verdict = verdicts[task.key]
        result = TaskResult.start(task)
        result.fail(BrokenTask(f"broken environment ({task_name(task)}): {verdict['why']}\n{verdict['tail']}"))
        result.end(0.0)
        ledger.record(ledger_row(result, []), int(settings["batch_size"]))


def say(first: dict[str, Task], known: dict[str, dict[str, Any]]) -> None:
    """One line of verdicts, then one per broken environment."""
    counts = {v: sum(known.get(env, {}).get("verdict") == v for env in first)
              for v in ("ok", BROKEN, "unchecked", "failed")}
    print(f"  {counts['ok']} held up, {counts[BROKEN]} broken (never sent to the model)"
          + (f", {counts['unchecked']} not checked (verifier outside the sandbox)" if counts["unchecked"] else "")
          + (f", {counts['failed']} could not be checked (their tasks run)" if counts["failed"] else ""),
          file=sys.stderr)
    for env, task in first.items():
        verdict = known.get(env, {})
        if verdict.get("verdict") in (BROKEN, "failed"):
            print(f"  {verdict['verdict']}: {task_name(task)}: {verdict['why']}", file=sys.stderr)
