"""Every model call a run pays for is booked the same way (agent/clients.py): a judge's call, a vision
call to another model and a compression summary each reserve their worst case in the run's spend
journal before they are sent, and each is booked in the sweep's budget (`budget.sweep_max_cost_usd`).
Real CLI runs against mock servers; the journal and the sweep's booking are read from their files while
a call is held by the mock, and after."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import read_jsonl, write_dataset
from test_budget import PRICED
from test_compress import COMPRESS, PROMPTS, train_tokenizer

from hermes_exp.mock.server import MockServer
from hermes_exp.money.sweep_book import Book

PRICE = 1000 / 1e6  # PRICED: USD per token, prompt and completion alike
BUDGETS = ["budget.max_cost_usd=100", "budget.sweep_max_cost_usd=100"]
HELD = {"faults": {"always": "timeout", "hang_seconds": 4}}  # every call answered, after 4 s


def served(record: Path) -> list[float]:
    """What each chat answer the mock served cost at the run's prices."""
    return [(r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"]) * PRICE
            for r in (read_jsonl(record) if record.exists() else []) if r["status"] == 200 and r.get("usage")]


def journal(run_dir: Path) -> list[dict]:
    return [json.loads(line) for f in sorted((run_dir / "spend").glob("*.jsonl")) for line in f.read_text().splitlines()]


def booked(run_dir: Path) -> tuple[float, float]:
    """(spent, reserved) of the run in its sweep budget file."""
    booked = Book(run_dir).totals()
    return booked.spent, booked.reserved


def hold(proc: subprocess.Popen, server: MockServer, ready=lambda: True) -> None:
    """Wait until `server` holds a call (and `ready()`), while the run is still going."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None and not (server.in_flight >= 1 and ready()):
        time.sleep(0.02)
    assert proc.poll() is None and server.in_flight >= 1, proc.stderr.read().decode()[-3000:]


def start(cwd: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "hermes_exp.cli", *args], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


@pytest.mark.slow
def test_a_judge_call_and_a_vision_call_are_journaled_and_booked_in_the_sweep(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "IMAGINE: a green field\nLOOK: images/image_1.png\nDescribe",
                                                 "rubric": 'Mentions "image"'}])
    run_dir = tmp_path / "outputs" / "paid"
    with MockServer(record_path=str(tmp_path / "agent.jsonl")) as agent, \
            MockServer(record_path=str(tmp_path / "judge.jsonl"), **HELD) as judge:
        proc = start(tmp_path, f"dataset.path={data}", "run_name=paid", "num_workers=1", "filters=none",
                     "sandbox=local", "distribution=creative", "distribution.toolsets.image_gen=100",
                     "distribution.toolsets.vision=100", "distribution.toolsets.web=0",
                     f"model.base_url={agent.base_url}", *PRICED, *BUDGETS,
                     "toolsets.vision.tools.vision_analyze.model={name: mock-vision}",  # a second client
                     "verifier=judge", f"verifier.model={{name: judge-x, base_url: '{judge.base_url}', "
                                       "pricing: {prompt: 1000, completion: 1000}}")
        hold(proc, judge)  # the agent's and the vision model's calls are answered; the judge's is held
        before = served(tmp_path / "agent.jsonl")
        entries = journal(run_dir)
        sent = [json.loads(line)["body"] for line in (tmp_path / "agent.jsonl").read_text().splitlines()]
        assert [b["model"] for b in sent if not b.get("tools")] == ["mock-vision"]  # the vision call
        reserved = [e for e in entries if "w" in e]
        settled = [e["a"] for e in entries if "a" in e]
        assert len(reserved) == len(before) + 1  # every call the agent's mock served, and the judge's held call
        assert sorted(settled) == pytest.approx(sorted(before))  # the vision call's cost among them
        assert len({e["k"] for e in reserved}) == 1  # all under the sample's key
        spent, held = booked(run_dir)
        assert spent == pytest.approx(sum(before)) and held > 0  # the judge's worst case, reserved
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()[-3000:]
    stats = json.loads((run_dir / "statistics.json").read_text())
    total = sum(served(tmp_path / "agent.jsonl")) + sum(served(tmp_path / "judge.jsonl"))
    assert stats["spent_usd"] == pytest.approx(total)
    assert booked(run_dir) == pytest.approx((total, 0.0))


@pytest.mark.slow
def test_a_summary_is_journaled_and_booked_in_the_sweep(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": PROMPTS[0]}, {"prompt": "Say hi"}])
    run_dir = tmp_path / "outputs" / "squeezed"
    with MockServer() as agent, MockServer(record_path=str(tmp_path / "summary.jsonl"), **HELD) as summariser:
        base = [f"dataset.path={data}", "run_name=squeezed", "distribution=terminal_only", "filters=none",
                f"model.base_url={agent.base_url}", *PRICED, *BUDGETS,
                f"compress.tokenizer={train_tokenizer(tmp_path / 'tokenizer.json')}"]
        first = subprocess.run([sys.executable, "-m", "hermes_exp.cli", *base], cwd=tmp_path, capture_output=True,
                               text=True, timeout=120)
        assert first.returncode == 0, first.stderr
        keys = {r["key"] for r in _tasks(run_dir)}
        run_spent = json.loads((run_dir / "statistics.json").read_text())["spent_usd"]
        assert booked(run_dir) == pytest.approx((run_spent, 0.0))
        proc = start(tmp_path, *base, *COMPRESS, "action=compress", f"+compress.model.base_url={summariser.base_url}")
        hold(proc, summariser, lambda: bool(journal(run_dir)))
        [entry] = journal(run_dir)  # written before the summary was asked for
        assert entry["k"] in keys and entry["w"] > 0
        assert booked(run_dir) == pytest.approx((run_spent, entry["w"]))  # reserved in the sweep's budget
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()[-3000:]
    [summary] = served(tmp_path / "summary.jsonl")
    metrics = json.loads((run_dir / "compression_metrics.json").read_text())
    assert metrics["summariser"]["cost_usd"] == pytest.approx(summary)
    assert booked(run_dir) == pytest.approx((run_spent + summary, 0.0))
    assert journal(run_dir) == []  # the summary is stored with its cost: nothing left for a later fold


def _tasks(run_dir: Path) -> list[dict]:
    with sqlite3.connect(run_dir / "ledger.db") as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT key FROM tasks")]
