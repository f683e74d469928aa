"""One run: plan pending tasks, dispatch them, commit each result to the ledger, export."""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hydra.utils import instantiate

from hermes_exp.dataset import open_dataset, scan, stream_tasks
from hermes_exp.settings import check, identity_config, identity_hash
from hermes_exp.store import filters as filters_mod
from hermes_exp.store.export import export
from hermes_exp.store.ledger import Ledger
from hermes_exp.progress import Progress
from hermes_exp.worker import release, run_task

log = logging.getLogger(__name__)
EXIT_OK, EXIT_TASK_ERRORS, EXIT_INTERRUPTED = 0, 3, 130


@contextmanager
def model_endpoint(settings: dict[str, Any]) -> Iterator[str]:
    """The base URL to call: the model's, else the provider's, else a mock server started for the run."""
    model = settings["model"]
    url = model.get("base_url") or (None if model.get("mock_server") else settings["provider"].get("base_url"))
    if url:
        yield url
        return
    from hermes_exp.mock_server import MockServer

    knobs = {k: v for k, v in (model.get("mock_server") or {}).items() if k != "autostart"}
    with MockServer(**knobs) as server:
        yield server.base_url


def ledger_row(result: dict[str, Any], filters: list[filters_mod.Filter]) -> dict[str, Any]:
    """Map a worker's result to its ledger row, deciding done / filtered / error."""
    usage = result.get("usage") or []
    row = {
        "key": result["key"], "prompt_index": result["index"], "prompt": result["row"]["prompt"],
        "toolsets": json.dumps(result.get("toolsets", [])), "result": json.dumps(result, ensure_ascii=False),
        "api_calls": result.get("api_calls", 0), "started_at": result["started_at"],
        "finished_at": result["finished_at"], "reason": None, "error_class": None, "error": None,
        "prompt_tokens": sum(u.get("prompt_tokens", 0) for u in usage),
        "completion_tokens": sum(u.get("completion_tokens", 0) for u in usage),
        "reasoning_tokens": sum((u.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0 for u in usage),
    }
    if result["state"] == "error":
        row.update(state="error", error_class=result["error_class"], error=result["error"])
    else:
        reason = filters_mod.first_reason(filters, result)
        row.update(state="filtered" if reason else "done", reason=reason)
    return row


def run(settings: dict[str, Any]) -> int:
    """Run one experiment to the end; return the process exit code."""
    check(settings)
    run_dir = Path(settings["run_dir"]).resolve()
    identity = identity_hash(settings)
    dataset = open_dataset(settings["dataset"]["path"])
    indexed = scan(dataset, identity, bool(settings["dataset"].get("skip_invalid")), settings.get("max_samples"))
    ledger = Ledger(run_dir / "ledger.db")
    try:
        ledger.claim_identity(identity, identity_config(settings))
        ledger.reindex(indexed)
        final = ledger.final_keys()
        pending = {index: key for index, key in indexed if key not in final}
        run_id = "hx-" + hashlib.blake2b(str(run_dir).encode(), digest_size=6).hexdigest()
        code = _dispatch(settings, ledger, dataset, pending, run_id, already=len(indexed) - len(pending))
        stats = export(ledger, run_dir, settings)
    finally:
        ledger.close()
    _summary(run_dir, stats, len(pending))
    return code if code != EXIT_OK or not stats["failed"] else EXIT_TASK_ERRORS


def _dispatch(settings: dict[str, Any], ledger: Ledger, dataset: Path, pending: dict[int, str],
              run_id: str, already: int) -> int:
    if not pending:
        print(f"nothing to run: all {already} tasks of this run are finished", file=sys.stderr)
        return EXIT_OK
    filters = filters_mod.build(settings.get("filters"))
    executor = instantiate(settings["executor"])
    progress = Progress(total=len(pending), already=already)
    invocation = ledger.start_invocation()
    ran = calls = 0
    with model_endpoint(settings) as base_url:
        settings = {**settings, "runtime": {"base_url": base_url, "run_id": run_id}}
        try:
            for result in executor.map_unordered(run_task, settings, stream_tasks(dataset, pending)):
                row = ledger_row(result, filters)
                ledger.record(row, int(settings["batch_size"]))
                ran, calls = ran + 1, calls + row["api_calls"]
                progress.update(row["state"])
        except KeyboardInterrupt:
            progress.close()
            print(f"\ninterrupted: {ran} finished tasks are saved; run the same command again to resume",
                  file=sys.stderr)
            return EXIT_INTERRUPTED
        finally:
            ledger.finish_invocation(invocation, ran, calls)
            release(run_id)
    progress.close()
    return EXIT_OK


def _summary(run_dir: Path, stats: dict[str, Any], ran: int) -> None:
    why = lambda counts: f" ({', '.join(f'{k}: {v}' for k, v in counts.items())})" if counts else ""  # noqa: E731
    print(
        f"\n{stats['kept']} kept, {stats['filtered']} filtered{why(stats['discarded'])}, "
        f"{stats['failed']} failed{why(stats['errors'])} of {stats['total_prompts']} prompts "
        f"({ran} run now, {stats['api_calls']} model calls in all)\n"
        f"  trajectories: {run_dir / 'trajectories.jsonl'}\n"
        f"  statistics:   {run_dir / 'statistics.json'}\n"
        f"  ledger:       {run_dir / 'ledger.db'}", file=sys.stderr)
    if stats["failed"]:
        print("  some tasks failed; run the same command again to retry them", file=sys.stderr)
