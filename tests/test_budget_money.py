"""The budget is never passed, across kill -9 and resume (on every executor: test_budget_broker.py) and for
CJK prompts: measured by what the mock server really served (the usage it reported, at the run's prices),
not by what the runner believes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import read_jsonl, request_count, run_cli, write_dataset
from test_budget import PRICED

from hermes_exp.money.cost import estimate_prompt_tokens
from hermes_exp.mock.model import tokens
from hermes_exp.mock.server import MockServer

PRICE = 1000 / 1e6  # PRICED: USD per token, prompt and completion alike


def served_cost(record: Path, containing: str = "") -> float:
    """What the server's answers cost at the run's prices: what a provider would bill (only the requests
    whose body contains `containing`, when given)."""
    return sum((r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"]) * PRICE
               for r in read_jsonl(record) if r["status"] == 200 and containing in json.dumps(r["body"]))


def worst_call(stderr: str) -> float:
    return max(float(x) for x in re.findall(r"could cost up to \$([0-9.]+)", stderr))


def test_cjk_is_not_undercounted() -> None:
    body = {"messages": [{"role": "user", "content": "请把这个文件里的所有数字加起来" * 50}]}
    assert estimate_prompt_tokens(body) >= tokens(json.dumps(body["messages"], ensure_ascii=False))
    ascii_body = {"messages": [{"role": "user", "content": "add up every number in this file " * 50}]}
    assert estimate_prompt_tokens(ascii_body) >= tokens(json.dumps(ascii_body["messages"]))


def test_cjk_prompts_stay_under_the_budget(tmp_path: Path) -> None:
    long_cjk = "请计算这个目录里所有文本文件的行数，并且解释每一步。" * 300  # ~$8 a call: the prompt dominates
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"{long_cjk} {i}"} for i in range(8)])
    limit = 40.0
    with MockServer(latency_ms=200, record_path=str(tmp_path / "r.jsonl")) as server:
        result = run_cli(tmp_path, f"model.base_url={server.base_url}", f"dataset.path={data}", "run_name=cjk",
                         "num_workers=4", "max_turns=2", "filters=none", "distribution=terminal_only", "distribution.toolsets.file=0", *PRICED,
                         f"budget.max_cost_usd={limit}")
    assert result.returncode == 4, result.stderr
    served = served_cost(tmp_path / "r.jsonl")
    assert 0 < served <= limit + worst_call(result.stderr)  # threads: one process
    stats = json.loads((tmp_path / "outputs" / "cjk" / "statistics.json").read_text())
    assert stats["spent_usd"] == pytest.approx(served, rel=1e-6)


@pytest.mark.slow
def test_kill_9_during_a_judges_call_still_counts_that_call(tmp_path: Path) -> None:
    """The judge's calls are journaled under the sample's key like the agent's: a kill -9 while the judge
    is answering cannot make the resumed run forget what that call cost."""
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "RUN: echo hello\nSay hello"}])
    record = tmp_path / "r.jsonl"
    args = [f"dataset.path={data}", "run_name=kj", "num_workers=1", "filters=none", "verifier=judge",
            "sandbox=local", "distribution=terminal_only", *PRICED, "budget.max_cost_usd=100"]
    # requests 0 and 1 are the agent's (a tool call, the answer); the judge's, request 2, takes 4 s
    faults = {"script": ["ok", "ok", "timeout"], "hang_seconds": 4}
    with MockServer(latency_ms=20, record_path=str(record), faults=faults) as server:
        args.append(f"model.base_url={server.base_url}")
        proc = subprocess.Popen([sys.executable, "-m", "hermes_exp.cli", *args], cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.monotonic() + 60
        spend = tmp_path / "outputs" / "kj" / "spend"
        # the judge's call is reserved before it is sent: wait until the mock holds it (a kill between the
        # two, on a loaded machine, left nothing in flight to be billed)
        while time.monotonic() < deadline and proc.poll() is None and (_reserved(spend) < 3 or server.in_flight < 1):
            time.sleep(0.05)
        assert proc.poll() is None and request_count(record) == 2, proc.stderr.read().decode()[-2000:]
        os.killpg(proc.pid, signal.SIGKILL)  # the agent is done, the judge's call is in flight
        proc.wait(timeout=30)
        time.sleep(4.5)  # the killed call is answered (and billed) all the same
        assert request_count(record) == 3
        resumed = run_cli(tmp_path, *args, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert request_count(record) == 6  # the sample ran and was judged again
    stats = json.loads((tmp_path / "outputs" / "kj" / "statistics.json").read_text())
    assert stats["spent_usd"] >= served_cost(record) - 1e-9, (stats["spent_usd"], served_cost(record))


def _reserved(spend_dir: Path) -> int:
    """Calls the run's spend journal has reserved so far (each written before its call is sent)."""
    return sum(1 for f in spend_dir.glob("*.jsonl") for line in f.read_text().splitlines() if '"w":' in line)
