"""Prompt caching: `cache_control` breakpoints on the wire where configured and nowhere else; the cached
and cache-write tokens the mock reports reach the ledger, statistics and cost."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import agent_bodies, read_jsonl, run_cli, write_dataset
from test_config import _compose

from hermes_exp.model.cache import CacheControl
from hermes_exp.money.cost import Pricing
from hermes_exp.errors import ConfigError
from hermes_exp.settings.resolved import to_plain

PRICED = ["model.pricing.prompt=3", "model.pricing.completion=15", "model.pricing.cached_prompt=0.3",
          "model.pricing.cache_write=3.75"]


def _marked(message: dict) -> list[dict]:
    content = message.get("content")
    return [p["cache_control"] for p in content if "cache_control" in p] if isinstance(content, list) else []


def test_breakpoints_reach_the_wire_only_where_configured_and_cached_tokens_are_priced(
        tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "RUN: echo a\nRUN: echo b\nRUN: echo c\nReport."},
                                                {"prompt": "Say hi"}])
    base = [f"dataset.path={data}", f"model.base_url={mock_server.base_url}", "filters=none", *PRICED]
    on = run_cli(tmp_path, *base, "run_name=on", "model.cache_control.enabled=true", "model.cache_control.ttl=1h")
    assert on.returncode == 0, on.stderr
    bodies = agent_bodies(tmp_path / "requests.jsonl")
    assert len(bodies) > 4
    for body in bodies:
        messages = body["messages"]
        marked = {i for i, m in enumerate(messages) if _marked(m)}
        carriers = [i for i, m in enumerate(messages) if i and m.get("content")]
        assert marked == {0, *carriers[-3:]} and len(marked) <= 4
        assert all(_marked(messages[i]) == [{"type": "ephemeral", "ttl": "1h"}] for i in marked)
        assert "cache_control" not in json.dumps(body["tools"])
    out = tmp_path / "outputs" / "on"
    stats = json.loads((out / "statistics.json").read_text())
    tokens = stats["tokens"]
    assert tokens["cached_tokens"] > 0 and tokens["cache_write_tokens"] > 0
    assert stats["cache_hit_share"] == round(tokens["cached_tokens"] / tokens["prompt_tokens"], 4) > 0
    with sqlite3.connect(out / "ledger.db") as db:
        results = [json.loads(r) for (r,) in db.execute("SELECT result FROM tasks")]
        cached = db.execute("SELECT SUM(cached_tokens), SUM(cache_write_tokens) FROM tasks").fetchone()
    assert cached == (tokens["cached_tokens"], tokens["cache_write_tokens"])
    usage = [u for r in results for u in r["usage"] + r.get("tool_model_calls", [])]  # + vision's own calls
    expected = sum(((u["prompt_tokens"] - u["cached_tokens"] - u["cache_write_tokens"]) * 3 + u["cached_tokens"] * 0.3
                    + u["cache_write_tokens"] * 3.75 + u["completion_tokens"] * 15) / 1e6 for u in usage)
    assert stats["cost_usd"] == pytest.approx(expected)
    saved = json.dumps(results) + (out / "trajectories.jsonl").read_text()
    assert "cache_control" not in saved  # only requests are marked, never the saved conversation

    sent_on = len(read_jsonl(tmp_path / "requests.jsonl"))
    off = run_cli(tmp_path, *base, "run_name=off")
    assert off.returncode == 0, off.stderr
    every = read_jsonl(tmp_path / "requests.jsonl")  # the off run's calls, the vision tool's own included
    assert not any("cache_control" in json.dumps(r["body"]) for r in every[sent_on:])
    assert json.loads((tmp_path / "outputs" / "off" / "statistics.json").read_text())["cache_hit_share"] == 0.0


def test_claude_presets_cache_and_others_do_not(tmp_path: Path) -> None:
    for model, enabled in (("sonnet", True), ("opus", True), ("gpt4o", False), ("mock", False)):
        settings = to_plain(_compose([f"model={model}", f"hydra.run.dir={tmp_path}"]))
        assert (CacheControl.from_config(settings["model"]["cache_control"]) is not None) is enabled, model
    sonnet = to_plain(_compose(["model=sonnet", f"hydra.run.dir={tmp_path}"]))["model"]
    assert Pricing.from_config(sonnet["pricing"]).cache_write == 3.75
    with pytest.raises(ConfigError, match="model.cache_control.last_turns=4"):
        CacheControl.from_config({"enabled": True, "last_turns": 4})
    with pytest.raises(ConfigError, match="model.cache_control.ttl='2h'"):
        CacheControl.from_config({"enabled": True, "ttl": "2h"})
