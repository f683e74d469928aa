"""Compression of a run's kept rows to a token budget (`action=compress`, or `outputs.compress=true`
at export): results come from the ledger when it has them, else are computed (summaries through the
model client) and stored; then `trajectories.compressed.jsonl` and `compression_metrics.json`."""

from __future__ import annotations

import json
import time
from collections import Counter as Tally
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from hermes_exp.compress import store
from hermes_exp.compress.config import CompressSettings, digest
from hermes_exp.compress.gate import check, wanted  # noqa: F401 - also this module's
from hermes_exp.compress.plan import Region, assemble, plan
from hermes_exp.compress.summarise import summarise
from hermes_exp.compress.tokens import Counter, load_counter
from hermes_exp.errors import ProviderError, RunStopped
from hermes_exp.model.tokens import MESSAGE_KEYS
from hermes_exp.store.atomic import atomic_writer
from hermes_exp.store.ledger import Ledger
from hermes_exp.store.sharegpt import system_mode, trajectory
from hermes_exp.tools.registry import Registry

COMPRESSED_FILE = "trajectories.compressed.jsonl"
METRICS_FILE = "compression_metrics.json"
USAGE_KEYS = ("api_calls", "prompt_tokens", "completion_tokens", "cost_usd")


def _rows(ledger: Ledger, settings: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], bool]]:
    """(task key, ShareGPT row, whether its turns have token data) of every kept task, in dataset order."""
    model, system = settings["model"]["name"], system_mode(settings)
    registry = Registry.from_settings(settings)
    for row in ledger.rows(("done",)):
        result = json.loads(row["result"])
        tokens = any(k in m for m in result.get("messages", ()) for k in MESSAGE_KEYS)
        yield row["key"], trajectory(row, result, result.get("row", {}), model, system, registry), tokens


def _local(turns: list[dict[str, str]], counts: list[int], cfg: CompressSettings) -> dict[str, Any] | Region:
    """The outcome when no summary is needed (or none could help), else the region to summarise."""
    total = sum(counts)
    base = {"tokens_before": total, "tokens_after": total, "turns_summarised": 0, "summary_tokens": 0,
            "conversations": None, "error": None, **dict.fromkeys(USAGE_KEYS, 0)}
    if total <= cfg.target_max_tokens:
        return {**base, "status": "skipped"}
    region = plan(turns, counts, cfg.target_max_tokens, cfg.summary_target_tokens, cfg.keep_last_turns)
    if region is None:
        return {**base, "status": "over_limit", "error": "over the target even with all its middle turns removed"}
    return region


def _compress_one(client: Any, cfg: CompressSettings, count: Counter, turns: list[dict[str, str]],
                  region: Region, key: str) -> dict[str, Any]:
    before = sum(count([t["value"] for t in turns]))
    summary = summarise(client, turns[region.start:region.until], region.start, cfg.summary_target_tokens, key)
    usage = {"api_calls": len(summary.usage),
             **{k: sum(u.get(k) or 0 for u in summary.usage) for k in USAGE_KEYS[1:]}}
    out = {"tokens_before": before, "tokens_after": before, "turns_summarised": 0, "summary_tokens": 0,
           "conversations": None, "error": None, **usage}
    if summary.text is None:
        status = "failed" if not summary.usage else "rejected"  # no answer at all: retried next time
        return {**out, "status": status, "error": summary.error}
    tokens = count([summary.text])[0]
    if tokens >= region.tokens:
        return {**out, "status": "rejected", "summary_tokens": tokens,
                "error": f"the summary ({tokens} tokens) is not shorter than the {region.tokens} tokens it replaces"}
    new = assemble(turns, region, summary.text, cfg.summary_notice)
    after = sum(count([t["value"] for t in new]))
    status = "compressed" if after <= cfg.target_max_tokens else "over_limit"
    return {**out, "status": status, "tokens_after": after, "turns_summarised": region.until - region.start,
            "summary_tokens": tokens, "conversations": new}


class _Summariser:
    """The summariser's model client and thread pool, opened at the first row that needs a summary."""

    def __init__(self, ledger: Ledger, settings: dict[str, Any], cfg: CompressSettings, stack: ExitStack) -> None:
        self.ledger, self.settings, self.cfg, self.stack = ledger, settings, cfg, stack
        self.client: Any = None
        self.workers = int(settings.get("num_workers") or 4)
        self.pool = stack.enter_context(ThreadPoolExecutor(self.workers, thread_name_prefix="summarise"))

    def _open(self) -> Any:
        """The summariser's client, booked like every model call of the run (agent/clients.py): the run's
        budget and the sweep's (this job is booked there first), and the spend journal, under an
        invocation number of its own (negative: no dispatch has it), which `close` removes once every
        summary is stored with its cost; a kill leaves it for the next run to count."""
        from hermes_exp.money import sweep_budget
        from hermes_exp.model.clients import model_endpoint, second_client
        from hermes_exp.model.probe import probe

        model = self.cfg.summariser_model()
        base_url = self.stack.enter_context(model_endpoint({**self.settings, "model": model}))
        probe(base_url)
        spent = self.ledger.spent_usd()
        invocation = {**(self.settings.get("invocation") or {}), "spent_usd": spent, "processes": 1,
                      "id": -time.time_ns() // 1000}
        settings = {**self.settings, "num_workers": self.workers, "invocation": invocation}
        sweep = sweep_budget.shared(settings)
        if sweep is not None:
            sweep.start(spent)  # no dispatch is in flight: the run's own calls are all settled
        return second_client(settings, model, self.settings["provider"], base_url=base_url)

    def close(self) -> None:
        """Every summary asked for is stored (with its cost) or cost nothing: the journal has done its job."""
        if self.client is not None:
            self.client.booking.discard()

    def submit(self, count: Counter, turns: list[dict[str, str]], region: Region, key: str) -> Future:
        if self.client is None:
            self.client = self._open()
        return self.pool.submit(_compress_one, self.client, self.cfg, count, turns, region, key)


def _compute(ledger: Ledger, settings: dict[str, Any], cfg: CompressSettings, count: Counter,
             stamp: str) -> tuple[dict[str, dict[str, Any]], str | None]:
    """Compute and store every result the ledger lacks; return the failures (not stored) and why the
    work stopped early (the budget), if it did."""
    failed: dict[str, dict[str, Any]] = {}
    pending: dict[Future, tuple[str, str]] = {}
    stopped: str | None = None

    def collect(futures: set[Future]) -> None:
        nonlocal stopped
        for future in futures:
            dig, key = pending.pop(future)
            try:
                outcome = future.result()
            except ProviderError as exc:  # the budget: stop asking for summaries
                stopped = str(exc)
                continue
            store.put(ledger, dig, key, outcome)
            if outcome["status"] == "failed":
                failed[dig] = outcome

    with ExitStack() as stack:
        summariser = _Summariser(ledger, settings, cfg, stack)
        for key, row, _ in _rows(ledger, settings):
            turns = row["conversations"]
            dig = digest(stamp, turns)
            if stopped or store.get(ledger, dig) is not None:
                continue
            local = _local(turns, count([t["value"] for t in turns]), cfg)
            if isinstance(local, dict):
                store.put(ledger, dig, key, local)
                continue
            pending[summariser.submit(count, turns, local, key)] = (dig, key)
            if len(pending) >= 2 * summariser.workers:
                collect(wait(pending, return_when=FIRST_COMPLETED).done)
        collect(set(pending))
        summariser.close()
    return failed, stopped


def compress(ledger: Ledger, run_dir: Path, settings: dict[str, Any]) -> dict[str, Any]:
    """Compress every kept row (reusing stored results) and write the outputs; return the metrics.
    Raises RunStopped when the budget stopped the summaries (the rows done so far are written)."""
    cfg = CompressSettings.from_settings(settings)
    count, tokenizer_id = load_counter(cfg.tokenizer)
    stamp = cfg.stamp(tokenizer_id)
    failed, stopped = _compute(ledger, settings, cfg, count, stamp)
    metrics = _write(ledger, run_dir, settings, cfg, stamp, failed)
    if stopped:
        raise RunStopped(f"compression stopped early: {stopped}",
                         "raise budget.max_cost_usd and run action=compress again; stored results are kept")
    return metrics


def _write(ledger: Ledger, run_dir: Path, settings: dict[str, Any], cfg: CompressSettings, stamp: str,
           failed: dict[str, dict[str, Any]]) -> dict[str, Any]:
    status: Tally[str] = Tally()
    totals: Tally[str] = Tally()
    with atomic_writer(run_dir / COMPRESSED_FILE) as out:
        for key, row, tokens in _rows(ledger, settings):
            dig = digest(stamp, row["conversations"])
            outcome = store.get(ledger, dig) or failed.get(dig)
            if outcome is None:
                status["pending"] += 1  # stopped by the budget before its turn
                continue
            status[outcome["status"]] += 1
            totals.update({k: outcome[k] or 0 for k in USAGE_KEYS})
            totals["tokens_before"] += outcome["tokens_before"]
            fits = outcome["status"] in ("skipped", "compressed")
            if not (fits or cfg.keep_over_limit):
                status["dropped"] += 1
                continue
            totals["tokens_written"] += outcome["tokens_after"]
            row["conversations"] = outcome["conversations"] or row["conversations"]
            row["compression"] = {k: outcome[k] for k in ("status", "tokens_before", "tokens_after",
                                                          "turns_summarised", "summary_tokens", "error")}
            if tokens:  # a summary is text no server sampled: the turns' token data no longer matches the row
                row["compression"]["token_data"] = "dropped" if outcome["turns_summarised"] else "unchanged"
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    metrics = _metrics(cfg, status, totals)
    with atomic_writer(run_dir / METRICS_FILE) as out:
        out.write(json.dumps(metrics, indent=2) + "\n")
    return metrics


def _metrics(cfg: CompressSettings, status: Tally[str], totals: Tally[str]) -> dict[str, Any]:
    rows = sum(v for k, v in status.items() if k != "dropped")
    return {
        "settings": {"tokenizer": cfg.tokenizer, "target_max_tokens": cfg.target_max_tokens,
                     "summary_target_tokens": cfg.summary_target_tokens, "keep_last_turns": cfg.keep_last_turns,
                     "keep_over_limit": cfg.keep_over_limit, "model": cfg.model.get("name")},
        "rows": rows, "written": rows - status["dropped"] - status["pending"], "dropped": status["dropped"],
        "compressed": status["compressed"], "skipped_under_target": status["skipped"],
        "over_limit": status["over_limit"], "summary_rejected": status["rejected"],
        "summary_failed": status["failed"], "pending": status["pending"],
        "tokens": {"before": totals["tokens_before"], "written": totals["tokens_written"]},
        "summariser": {"api_calls": totals["api_calls"], "prompt_tokens": totals["prompt_tokens"],
                       "completion_tokens": totals["completion_tokens"], "cost_usd": round(totals["cost_usd"], 8)},
    }


def describe(metrics: dict[str, Any], run_dir: Path) -> str:
    text = (f"compression: {metrics['compressed']} compressed, {metrics['skipped_under_target']} under the target, "
            f"{metrics['over_limit']} over it, {metrics['summary_rejected']} summaries rejected, "
            f"{metrics['summary_failed']} failed; {metrics['written']} rows written, {metrics['dropped']} dropped "
            f"({metrics['summariser']['api_calls']} summariser calls in all)\n"
            f"  compressed:   {run_dir / COMPRESSED_FILE}\n  metrics:      {run_dir / METRICS_FILE}")
    if metrics["summary_failed"]:
        text += "\n  some summaries failed; run action=compress again to retry them"
    return text
