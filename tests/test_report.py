"""`hermes-exp-report` on real runs made by the real CLI, checked in real headless Chromium (driven by
Playwright): the page loads with no errors and no network, charts draw, the browser lists
every task, the search filters, and model output is shown as text, never as HTML."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from report_browser import Browser, find_chromium

DEMO = Path(__file__).resolve().parents[1] / "hermes_exp" / "data" / "demo_prompts.jsonl"
HOSTILE = "Say hi to <img src=x onerror=\"window.__pwned=1\"></script><b>zebra</b> please."


def hx(args: list[str], cwd: Path, module: str = "hermes_exp.cli.app") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def dataset(tmp: Path) -> Path:
    rows = [json.loads(line) for line in DEMO.read_text().splitlines()][:5] + [{"prompt": HOSTILE}]
    path = tmp / "prompts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def ledger_counts(run_dir: Path) -> dict[str, int]:
    with sqlite3.connect(run_dir / "ledger.db") as db:
        return dict(db.execute("SELECT state, COUNT(*) FROM tasks GROUP BY state").fetchall())


@pytest.fixture(scope="module")
def chromium() -> str:
    binary = find_chromium()
    if binary is None:
        message = "chromium is not installed (apt-get install -y --no-install-recommends chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return binary


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-job sweep: one job keeps everything, the other loses reasoning in half its conversations."""
    tmp = tmp_path_factory.mktemp("sweep")
    proc = hx(["-m", f"dataset.path={dataset(tmp)}", "run_name=x",
               "model.mock_server.no_reasoning_rate=0.0,0.5"], tmp)
    assert proc.returncode == 0, proc.stderr
    return tmp / "outputs" / "x"


@pytest.fixture(scope="module")
def browser(chromium: str) -> Browser:
    with Browser(chromium) as b:
        yield b


def visible(browser: Browser) -> int:
    return browser.evaluate("[...document.querySelectorAll('[data-traj]')].filter(d => !d.hidden).length")


def test_sweep_report_renders_in_chromium(sweep: Path, browser: Browser, tmp_path: Path) -> None:
    proc = hx([str(sweep)], sweep, module="hermes_exp.report")
    assert proc.returncode == 0, proc.stderr
    page = sweep / "report.html"
    jobs = sorted(p.parent for p in sweep.glob("*/ledger.db"))
    assert len(jobs) == 2
    expected = sum(sum(ledger_counts(job).values()) for job in jobs)

    browser.open(page.as_uri())
    assert browser.evaluate("document.querySelectorAll('[data-traj]').length") == expected == 12
    assert browser.evaluate("document.querySelectorAll('[data-run-row]').length") == 2
    assert browser.evaluate("document.querySelectorAll('.js-plotly-plot .main-svg').length") >= 7
    # The filtered tasks (no reasoning) of the second job are listed with their reason.
    filtered = sum(ledger_counts(job).get("filtered", 0) for job in jobs)
    assert filtered > 0
    assert browser.evaluate("document.querySelectorAll('[data-state=filtered]').length") == filtered

    # The first trajectory is open: every kind of turn and block is rendered, each with its own style.
    kinds = browser.evaluate("[...document.querySelectorAll('details[open] [data-turn]')].map(t => t.dataset.turn)")
    assert {"system", "human", "gpt", "tool"} <= set(kinds)
    for block in ("think", "tool_call", "tool_response"):
        assert browser.evaluate(f"document.querySelectorAll('details[open] .part.{block}').length") > 0
    assert browser.evaluate("getComputedStyle(document.querySelector('.part.think')).backgroundColor") != \
        browser.evaluate("getComputedStyle(document.querySelector('.part.tool_call')).backgroundColor")
    browser.screenshot(tmp_path / "sweep.png")
    assert (tmp_path / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # Typing in the search box filters by prompt text.
    browser.evaluate("q = document.getElementById('q'); q.value = 'SOLAR system';"
                     "q.dispatchEvent(new Event('input'))")
    assert visible(browser) == 2  # that prompt, once per job
    assert browser.evaluate("document.getElementById('shown').textContent") == "2"
    browser.evaluate("q.value = ''; q.dispatchEvent(new Event('input'))")
    assert visible(browser) == expected

    # Hostile prompt text stays text: no element injected, no handler run.
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    assert browser.evaluate("document.querySelectorAll('#traj-list img, #traj-list b').length") == 0
    assert browser.evaluate(f"document.body.innerText.includes({json.dumps('<b>zebra</b>')})")

    assert browser.problems() == []
    assert [u for u in browser.requested_urls() if not u.startswith(("file:", "data:", "about:"))] == []


def test_search_from_url_and_cap(sweep: Path, browser: Browser, tmp_path: Path) -> None:
    """A single run, capped at 3 trajectories, opened with `#q=` in the address: the page says it is a
    sample and applies the search on load."""
    run = sorted(p.parent for p in sweep.glob("*/ledger.db"))[0]
    out = tmp_path / "one.html"
    proc = hx([str(run), "-o", str(out), "--max-trajectories", "3"], tmp_path, module="hermes_exp.report")
    assert proc.returncode == 0, proc.stderr
    assert str(out) in proc.stderr

    browser.open(out.as_uri() + "#q=" + "count%20the%20WORDS")
    assert browser.evaluate("document.querySelectorAll('[data-traj]').length") == 3
    assert visible(browser) == 1
    assert browser.evaluate("document.getElementById('q').value") == "count the WORDS"
    assert "Showing a sample of 3 of 6 tasks" in browser.evaluate("document.body.innerText")
    browser.screenshot(tmp_path / "single.png")
    assert browser.problems() == []


def test_bad_paths_name_the_fix(tmp_path: Path) -> None:
    proc = hx([str(tmp_path / "missing")], tmp_path, module="hermes_exp.report")
    assert proc.returncode == 2 and "is not a directory" in proc.stderr
    proc = hx([str(tmp_path)], tmp_path, module="hermes_exp.report")
    assert proc.returncode == 2 and "neither a run directory" in proc.stderr and "fix:" in proc.stderr


def test_missing_extra_gives_install_hint(tmp_path: Path) -> None:
    # A real interpreter in which plotly cannot be imported (a None entry blocks the import).
    code = ("import sys; sys.modules['plotly'] = None; from hermes_exp.report.cli import main; "
            f"sys.exit(main([{str(tmp_path)!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "pip install 'hermes-exp[report]'" in proc.stderr and "plotly" in proc.stderr


@pytest.fixture(scope="module")
def verified(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole demo (five verified prompts, one of which fails) twice per prompt, swept over two
    distributions: terminal_only's job never calls the web or browser tools that default's job does."""
    tmp = tmp_path_factory.mktemp("verified")
    proc = hx(["-m", "run_name=v", "samples_per_prompt=2", "distribution=terminal_only,default"], tmp)
    assert proc.returncode == 0, proc.stderr
    return tmp / "outputs" / "v"


PLOTS = """[...document.querySelectorAll('.chart')].map(c => {
  const p = c.querySelector('.js-plotly-plot');
  return {id: c.id, text: c.innerText,
          traces: p ? p.data.map(t => ({name: t.name, x: [...t.x], y: [...t.y]})) : null,
          yticks: [...c.querySelectorAll('.ytick text')].map(t => t.textContent)};
})"""


def plots(browser: Browser) -> dict[str, dict]:
    return {p["id"].removeprefix("chart-"): p for p in browser.evaluate(PLOTS)}


def bars(plot: dict) -> int:
    return sum(1 for t in plot["traces"] for y in t["y"] if y is not None)


def cell(browser: Browser, name: str) -> str:
    return browser.evaluate(f"document.querySelector('[data-run-row] td.{name}').textContent").strip()


def test_a_runs_report_tells_the_numbers_of_its_statistics(verified: Path, browser: Browser) -> None:
    """Every number the page shows for one run is the one statistics.json and trajectories.jsonl hold:
    tokens (reasoning is part of completion, not added again), outcomes, reasoning coverage, tool calls,
    assistant turns per trajectory, and each sample's verdict, which can be filtered on."""
    run = verified / "distribution=default"
    proc = hx([str(run)], run, module="hermes_exp.report")
    assert proc.returncode == 0, proc.stderr
    stats = json.loads((run / "statistics.json").read_text())
    lines = [json.loads(line) for line in (run / "trajectories.jsonl").read_text().splitlines()]
    browser.open((run / "report.html").as_uri())

    assert cell(browser, "tasks") == str(stats["total_prompts"])
    tokens = stats["tokens"]
    assert cell(browser, "tokens") == f"{tokens['prompt_tokens'] + tokens['completion_tokens']:,}"
    assert (cell(browser, "done"), cell(browser, "filtered"), cell(browser, "error")) == \
        (str(stats["kept"]), str(stats["filtered"]), str(stats["failed"]))
    assert cell(browser, "coverage") == f"{stats['reasoning_statistics']['coverage_percent']:.1f}%"

    turns = browser.evaluate("[...document.querySelectorAll('[data-traj][data-state=done] .turn-count')]"
                             ".map(b => b.textContent)")
    counts = [sum(t["from"] == "gpt" for t in line["conversations"]) for line in lines]
    assert turns == [f"{n} assistant turn{'s' if n != 1 else ''}" for n in counts]

    verification = stats["verification"]
    failed = verification["scored"] - verification["passed"]
    assert failed > 0
    assert browser.evaluate("document.querySelectorAll('[data-verdict=passed]').length") == verification["passed"]
    assert browser.evaluate("document.querySelectorAll('[data-verdict=failed]').length") == failed
    browser.evaluate("f = document.getElementById('verdict-filter'); f.value = 'failed';"
                     "f.dispatchEvent(new Event('input'))")
    assert visible(browser) == failed
    assert browser.evaluate("[...document.querySelectorAll('[data-traj]')].filter(d => !d.hidden)"
                            ".every(d => d.querySelector('.verdict').textContent.startsWith('not passed'))")
    browser.evaluate("f.value = ''; f.dispatchEvent(new Event('input'))")

    charts = plots(browser)
    calls = charts["tool-calls"]["traces"][0]
    assert dict(zip(calls["x"], calls["y"])) == \
        {name: t["count"] for name, t in stats["tool_statistics"].items() if t["count"]}
    for name, plot in charts.items():  # a single bar says nothing a number would not: it is a number
        assert plot["traces"] is None or bars(plot) >= 2, name
        assert not any(t.startswith(("\u2212", "-")) for t in plot["yticks"]), name  # no axis below zero
    assert charts["cost"]["traces"] is None and "0.0000 USD" in charts["cost"]["text"]
    assert f"{stats['kept']} kept" in charts["outcomes"]["text"]
    verified_chart = charts["verified"]
    assert "% of prompts" not in verified_chart["text"]
    assert verified_chart["traces"][0]["x"][0] == "pass rate (of samples)"

    # The time of each phase: its mean over finished tasks as the ledger keeps it, and the open trajectory's own.
    with sqlite3.connect(run / "ledger.db") as db:
        timings = [json.loads(t) for t, in db.execute("SELECT json_extract(result, '$.timings') FROM tasks "
                                                      "WHERE state IN ('done', 'filtered')")]
        [first] = db.execute("SELECT json_extract(result, '$.timings') FROM tasks WHERE prompt_index = ? AND "
                             "sample = ?", [lines[0]["prompt_index"], lines[0].get("sample", 0)]).fetchall()
    agent = sum(t["agent"] for t in timings) / len(timings)
    assert browser.evaluate("document.querySelector('[data-timings-row] td.phase-agent').textContent") == \
        f"{agent:.2f} s"
    shown = browser.evaluate("document.querySelector('details.traj[open] .timings').textContent").split(" \u00b7 ")
    assert [part.split(" ")[0] for part in shown] == list(json.loads(first[0]))

    # The first trajectory opens on the conversation, its system prompt (the tool schemas) folded away.
    assert browser.evaluate("document.querySelector('details.traj[open] [data-turn=system] details.system')"
                            ".open") is False
    assert browser.evaluate("document.querySelector('details.traj[open] [data-turn=human]').checkVisibility()")
    assert browser.problems() == []


def test_a_sweeps_report_draws_no_rate_for_a_tool_a_run_never_called(verified: Path, browser: Browser) -> None:
    proc = hx([str(verified)], verified, module="hermes_exp.report")
    assert proc.returncode == 0, proc.stderr
    browser.open((verified / "report.html").as_uri())
    charts = plots(browser)
    calls = {t["name"]: dict(zip(t["x"], t["y"])) for t in charts["tool-calls"]["traces"]}
    success = {t["name"]: dict(zip(t["x"], t["y"])) for t in charts["tool-success"]["traces"]}
    assert not calls["distribution=terminal_only"].get("web_search") and calls["distribution=default"]["web_search"] > 0
    for run, rates in success.items():
        for tool, rate in rates.items():
            assert (rate is None) == (not calls[run].get(tool)), (run, tool, rate)
    for name, plot in charts.items():
        assert plot["traces"] is None or bars(plot) >= 2, name
    assert browser.problems() == []


def test_failed_verifications_that_were_filtered_out_can_be_found(browser: Browser, tmp_path: Path) -> None:
    """filters=verified keeps only passing samples: the failed one is in the ledger alone, and the page
    shows it with its verdict and reward, as statistics.json counts it."""
    proc = hx(["run_name=fv", "filters=verified"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "outputs" / "fv"
    assert hx([str(run)], run, module="hermes_exp.report").returncode == 0
    verification = json.loads((run / "statistics.json").read_text())["verification"]
    browser.open((run / "report.html").as_uri())
    browser.evaluate("f = document.getElementById('verdict-filter'); f.value = 'failed';"
                     "f.dispatchEvent(new Event('input'))")
    assert visible(browser) == verification["scored"] - verification["passed"] == 1
    shown = browser.evaluate("[...document.querySelectorAll('[data-traj]')].filter(d => !d.hidden)"
                             ".map(d => [d.dataset.state, d.querySelector('.verdict').textContent])")
    assert shown == [["filtered", "not passed 0.00"]]
    assert browser.evaluate("document.querySelectorAll('[data-verdict=passed]').length") == verification["passed"]
    assert browser.problems() == []


def test_samples_beyond_a_lowered_samples_per_prompt_are_not_counted(browser: Browser, tmp_path: Path) -> None:
    """Two samples per prompt, then samples_per_prompt=1: the second samples stay in the ledger, out of
    statistics.json, and out of the report's numbers too (it said 26 tasks where statistics.json said 13)."""
    for samples in ("2", "1"):
        proc = hx(["run_name=lo", f"samples_per_prompt={samples}", "distribution=terminal_only"], tmp_path)
        assert proc.returncode == 0, proc.stderr
    run = tmp_path / "outputs" / "lo"
    assert hx([str(run)], run, module="hermes_exp.report").returncode == 0
    stats = json.loads((run / "statistics.json").read_text())
    browser.open((run / "report.html").as_uri())
    assert (cell(browser, "tasks"), cell(browser, "done")) == (str(stats["total_prompts"]), str(stats["kept"])) \
        == ("13", "13")
    tokens = stats["tokens"]
    assert cell(browser, "tokens") == f"{tokens['prompt_tokens'] + tokens['completion_tokens']:,}"
    assert browser.evaluate("document.querySelectorAll('[data-traj]').length") == 13
