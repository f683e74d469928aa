"""Toolsets through the real CLI: the offline demo uses every toolset it has; with a real model a drawn
toolset whose backend is not configured stops the run at start-up in one message; the listing shows
every toolset and its backend status; configured backends are really used."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from conftest import known_tools, read_jsonl, request_count, run_cli, write_dataset
from webfixtures import web_server

import hermes_exp
from hermes_exp.settings.paths import config_dir
from hermes_exp.cli.listing import compose_settings
from hermes_exp.tools.registry import Registry


def test_offline_demo_uses_every_toolset(tmp_path: Path) -> None:
    """`hermes-exp` with no key and no override: distribution=default draws all six of Hermes's toolsets
    for every prompt, and across the demo's rows each is used (the browser where a prompt asks for it)."""
    result = run_cli(tmp_path, "run_name=all")
    assert result.returncode == 0, result.stderr
    rows = read_jsonl(tmp_path / "outputs" / "all" / "trajectories.jsonl")
    registry = Registry.from_settings(compose_settings(config_dir(), []))
    demo = (Path(hermes_exp.__file__).parent / "data" / "demo_prompts.jsonl").read_text().splitlines()
    assert len(rows) == len(demo) and all(r["completed"] for r in rows)
    assert set(registry.toolsets) == {"web", "browser", "vision", "image_gen", "terminal", "file"}
    for name, toolset in registry.toolsets.items():
        assert all(name in r["toolsets_used"] for r in rows), name
        used = sum(r["tool_stats"][tool]["success"] for r in rows for tool in toolset.tools)
        assert used > 0, f"the demo never used toolset {name}"
    assert set(rows[0]["tool_stats"]) == set(known_tools())
    failures = {t: s["failure"] for r in rows for t, s in r["tool_stats"].items() if s["failure"]}
    assert not failures, failures


def test_unconfigured_backend_stops_a_real_model_run_at_start_up(tmp_path: Path) -> None:
    env = {"HX_FAKE_KEY": "sk-fake", "BRAVE_API_KEY": ""}
    result = run_cli(tmp_path, "model=sonnet", "provider.api_key_env=HX_FAKE_KEY", env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    err = result.stderr
    assert err.count("error:") == 1 and "distribution 'default' can draw toolset(s) that cannot be used" in err
    assert "web: web_search: the SearXNG search backend has no url" in err
    assert "toolsets.web.tools.web_search.backends.searxng.url=" in err
    assert "image_gen: image_generate: no images endpoint" in err
    assert "hermes-exp --list-distributions" in err
    assert "terminal:" not in err and "vision:" not in err  # those are ready
    assert not (tmp_path / "outputs" / "demo" / "ledger.db").exists()
    ok = run_cli(tmp_path, "model=sonnet", "provider.api_key_env=HX_FAKE_KEY", "distribution=terminal_only",
                 "model.base_url=http://127.0.0.1:9/v1", env=env)
    assert "cannot be used" not in ok.stderr  # a distribution without those toolsets gets past the check


def test_listing_shows_every_toolset_and_its_backend_status(tmp_path: Path) -> None:
    mock = run_cli(tmp_path, "--list-distributions")
    assert mock.returncode == 0, mock.stderr
    for name in Registry.from_settings(compose_settings(config_dir(), [])).toolsets:
        assert f"\n  {name} " in mock.stdout
    assert "NOT CONFIGURED" not in mock.stdout and "web_search, web_extract" in mock.stdout
    for dist in ("default", "terminal_tasks", "mixed_tasks", "browser_only", "science"):
        assert f"\n  {dist} " in mock.stdout
    real = run_cli(tmp_path, "--list-distributions", "model=sonnet", env={"BRAVE_API_KEY": ""})
    web = real.stdout.split("\n  web ", 1)[1].split("\n  vision", 1)[0]
    assert "NOT CONFIGURED" in web and "searxng.url" in web
    brave = run_cli(tmp_path, "--list-distributions", "model=sonnet", "toolsets.web.tools.web_search.backend=brave",
                    env={"BRAVE_API_KEY": "sk-brave"})
    web = brave.stdout.split("\n  web ", 1)[1].split("\n  vision", 1)[0]
    assert "NOT CONFIGURED" not in web and "ready" in web


def test_a_real_model_run_uses_the_configured_search_backend(tmp_path: Path, mock_server) -> None:
    """vllm_local is a real-model preset (no mock services): the search goes to the configured SearXNG."""
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "SEARCH: river otters"}])
    with web_server() as web:
        result = run_cli(tmp_path, f"dataset.path={data}", "model=vllm_local", f"model.base_url={mock_server.base_url}",
                         "distribution=minimal", f"toolsets.web.tools.web_search.backends.searxng.url={web.root}/searxng/search",
                         "run_name=real")
        searches = [r for r in web.requests if r["path"] == "/searxng/search"]
    assert result.returncode == 0, result.stderr
    assert len(searches) == 1 and searches[0]["query"]["q"] == ["river otters"]
    row = read_jsonl(tmp_path / "outputs" / "real" / "trajectories.jsonl")[0]
    assert row["tool_stats"]["web_search"] == {"count": 1, "success": 1, "failure": 0}
    assert "https://example.org/otter/0" in row["conversations"][3]["value"]
    with sqlite3.connect(tmp_path / "outputs" / "real" / "ledger.db") as db:
        identity = json.loads(db.execute("SELECT value FROM meta WHERE key = 'identity_config'").fetchone()[0])
    assert "url" not in json.dumps(identity["toolsets"]["web"]["tools"]["web_search"]["backends"]["searxng"])
    assert request_count(tmp_path / "requests.jsonl") == 2


def test_tools_that_miss_the_same_thing_say_it_once() -> None:
    from hermes_exp.tools.readiness import _grouped

    need = "needs the `playwright` package: pip install 'hermes-exp[browser]'"
    assert _grouped({"a": need, "b": need}, 2) == [f"all its tools: {need}"]
    assert _grouped({"a": need, "b": need, "c": "no key"}, 4) == [f"a, b: {need}", "c: no key"]
    assert _grouped({"a": need}, 3) == [f"a: {need}"]
