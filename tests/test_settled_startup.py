"""A settled run's no-op does not build the toolsets it will not use (every tool module, the browser's
asyncio); a run with work still checks them before anything is claimed or run, and one that looked settled
at start-up but finds work under the run lock checks them before any task starts. The real CLI against the
mock model in fresh interpreters, real ledgers."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import write_dataset
from test_scan_cache import _age, aged_run

from hermes_exp.settings.paths import config_dir
from hermes_exp.errors import ConfigError
from hermes_exp.cli.listing import compose_settings
from hermes_exp.run.prepare import Prepared

BUILT = ("asyncio", "ssl", "hermes_exp.tools.readiness", "hermes_exp.tools.terminal", "hermes_exp.tools.browser")
# Runs the CLI and says which of BUILT it imported (atexit: after its sys.exit).
WRAPPER = """
import atexit, json, os, runpy, sys
atexit.register(lambda: open(os.environ["HX_IMPORTED"], "w").write(json.dumps(
    [m for m in %r if m in sys.modules])))
sys.argv = ["hermes-exp", *sys.argv[1:]]
runpy.run_module("hermes_exp.cli.app", run_name="__main__")
""" % (BUILT,)
# A real (not mock) model: each toolset it can draw must be usable. image_gen needs the key its
# api_key_env names; the variable's name and the endpoint are not the run's identity.
IMAGE_KEY = "HX_TEST_IMAGE_KEY"
REAL = ["model.mock_server=null", "+distribution.toolsets.image_gen=1",
        "toolsets.image_gen.tools.image_generate.url=http://127.0.0.1:9/v1/images/generations",
        f"toolsets.image_gen.tools.image_generate.api_key_env={IMAGE_KEY}"]


def _cli(cwd: Path, args: list[str], key: bool = True) -> tuple[subprocess.CompletedProcess, list[str]]:
    record = cwd / "imported.json"
    env = {k: v for k, v in os.environ.items() if k != IMAGE_KEY}
    env.update({"HX_IMPORTED": str(record), **({IMAGE_KEY: "img-key"} if key else {})})
    done = subprocess.run([sys.executable, "-c", WRAPPER, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)
    return done, json.loads(record.read_text())


def _invocations(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COUNT(*) FROM invocations").fetchone()[0]


def _tasks(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT prompt_index, state, error_class FROM tasks ORDER BY prompt_index").fetchall()


def test_a_settled_no_op_builds_no_toolset(tmp_path: Path, mock_server) -> None:
    _, _, args = aged_run(tmp_path, mock_server.base_url, "lean")
    first, imported = _cli(tmp_path, args)
    assert first.returncode == 0 and "4 planned now" in first.stderr, first.stderr
    assert set(BUILT) - {"hermes_exp.tools.browser"} <= set(imported)  # a run with work checks and uses them
    planned, imported = _cli(tmp_path, args)  # plans from the cached scan, keeps the verdict
    assert "nothing to run: all 4 tasks" in planned.stderr and "hermes_exp.tools.readiness" in imported
    for _ in range(2):
        settled, imported = _cli(tmp_path, args)
        assert settled.returncode == 0 and "nothing to run: all 4 tasks" in settled.stderr, settled.stderr
        assert imported == []


def test_a_run_with_work_checks_the_toolsets_before_claiming_anything(tmp_path: Path, mock_server) -> None:
    rows, data, args = aged_run(tmp_path, mock_server.base_url, "real")
    args = [*args, *REAL]
    db = tmp_path / "outputs" / "real" / "ledger.db"
    assert _cli(tmp_path, args)[0].returncode == 0
    assert "nothing to run" in _cli(tmp_path, args)[0].stderr
    before = _tasks(db)
    assert [state for _, state, _ in before] == ["done"] * 4
    settled, _ = _cli(tmp_path, args, key=False)  # nothing will run: the image endpoint's key is not needed
    assert settled.returncode == 0 and "nothing to run: all 4 tasks" in settled.stderr, settled.stderr

    write_dataset(data, [*rows, {"prompt": "Say hello number 4"}])
    _age(data, 30)
    snapshot = (tmp_path / "outputs" / "real" / ".hydra" / "config.yaml").read_bytes()
    refused, _ = _cli(tmp_path, args, key=False)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "image_gen" in refused.stderr and f"export {IMAGE_KEY}" in refused.stderr, refused.stderr
    assert _tasks(db) == before  # refused before the run directory was claimed: nothing planned or run
    assert (tmp_path / "outputs" / "real" / ".hydra" / "config.yaml").read_bytes() == snapshot
    ran, _ = _cli(tmp_path, args)
    assert ran.returncode == 0 and "1 planned now" in ran.stderr, ran.stderr


def test_work_found_under_the_lock_is_checked_before_it_runs(tmp_path: Path, mock_server,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _, _, args = aged_run(tmp_path, mock_server.base_url, "race")
    args = [*args, *REAL]
    db = tmp_path / "outputs" / "race" / "ledger.db"
    for _ in range(2):
        assert _cli(tmp_path, args)[0].returncode == 0
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(IMAGE_KEY, raising=False)
    settings = compose_settings(config_dir(), [*args, f"run_dir={db.parent}"])
    assert Prepared(dict(settings), db.parent).settled()  # what run() sees at start-up
    listing = sorted(os.listdir(db.parent))
    for doubt in ({"pilot": 2}, {"max_turns": 3}, {"dataset": {**settings["dataset"], "path": str(tmp_path / "no.jsonl")}},
                  {"dataset": {**settings["dataset"], "where": {"topic": "x"}}}):
        assert not Prepared({**settings, **doubt}, db.parent).settled()  # any doubt, an error included: False
    assert not Prepared(dict(settings), tmp_path / "elsewhere").settled()
    assert sorted(os.listdir(db.parent)) == listing and not (tmp_path / "elsewhere").exists()  # wrote nothing

    def another_invocation_writes() -> None:  # once run() holds the lock: a provider error, retried by default
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE tasks SET state = 'error', error_class = 'provider' WHERE prompt_index = 1")

    from hermes_exp.run.invocation import run

    invocations = _invocations(db)
    with pytest.raises(ConfigError, match=f"export {IMAGE_KEY}"):
        run(settings, on_locked=another_invocation_writes)
    assert _tasks(db)[1] == (1, "error", "provider")  # not run
    assert _invocations(db) == invocations  # refused at start-up, not by the dispatch's own preflight


def _starts(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_settled_no_op_starts_no_mcp_server_and_work_found_late_starts_them(
        tmp_path: Path, mock_server, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mcp")
    starts = tmp_path / "starts.log"
    server = Path(__file__).parent / "mcp_server.py"
    _, _, args = aged_run(tmp_path, mock_server.base_url, "mcp")
    args = [*args, f"+mcp.servers.calc.command={sys.executable}", f"+mcp.servers.calc.args=['{server}',stdio,-,{starts}]",
            "+distribution.toolsets.calc=100"]
    out = tmp_path / "outputs" / "mcp"
    for _ in range(2):  # runs the tasks, then plans from the cached scan and keeps the verdict
        assert _cli(tmp_path, args)[0].returncode == 0
    exported = (out / "trajectories.jsonl").read_bytes(), (out / "statistics.json").read_bytes()
    assert b"mcp_calc_add" in exported[0] and b"mcp_calc_add" in exported[1]
    started = _starts(starts)
    assert started >= 2  # discovery, then a server for the work
    for _ in range(2):  # the second exports again (statistics.json removed): the tools the ledger kept
        settled, _ = _cli(tmp_path, args)
        assert settled.returncode == 0 and "nothing to run: all 4 tasks" in settled.stderr, settled.stderr
        (out / "statistics.json").unlink()
    assert _starts(starts) == started  # no server started to list tools nothing will call
    assert _cli(tmp_path, args)[0].returncode == 0
    assert ((out / "trajectories.jsonl").read_bytes(), (out / "statistics.json").read_bytes()) == exported

    monkeypatch.chdir(tmp_path)
    settings = compose_settings(config_dir(), [*args, f"run_dir={out}"])
    assert Prepared(dict(settings), out).settled()

    def another_invocation_writes() -> None:  # once run() holds the lock: a provider error, retried by default
        with sqlite3.connect(out / "ledger.db") as conn:
            conn.execute("UPDATE tasks SET state = 'error', error_class = 'provider' WHERE prompt_index = 1")

    from hermes_exp.run.invocation import run

    assert run(settings, on_locked=another_invocation_writes) == 0
    assert _starts(starts) >= started + 2  # discovered under the lock, then used by the re-run task
    again = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert again[1]["tool_stats"]["mcp_calc_add"]["success"] == 1, again[1]["tool_stats"]
