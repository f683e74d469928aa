"""Real providers, tested on the wire: config -> the request bodies a real loopback mock server records,
and the mock's injected faults -> retries, rate limiting, auth stop. Budget and cost: test_budget.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import read_jsonl, run_cli, write_dataset
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from hermes_exp.model.checks import check_config
from hermes_exp.model.client import ModelClient
from hermes_exp.model.ratelimit import Limits, RateLimiter
from hermes_exp.settings.paths import config_dir, register_resolvers
from hermes_exp.errors import ConfigError, ProviderError
from hermes_exp.mock.server import MockServer
from hermes_exp.settings.resolved import to_plain

TOOLS = [{"type": "function", "function": {"name": "terminal", "description": "run a command",
                                           "parameters": {"type": "object", "properties": {}}}}]
FAST_RETRY = ["model.retry.backoff_seconds=0.01", "model.retry.max_backoff_seconds=0.05"]


def settings_for(*overrides: str) -> dict[str, Any]:
    """The resolved settings as the app composes them (Hydra interpolations aside)."""
    register_resolvers()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir()), version_base=None):
        cfg = compose(config_name="config", overrides=["run_dir=/tmp/unused", "dataset.path=/tmp/unused",
                                                       *overrides])
    return to_plain(cfg)


def client_for(server: MockServer, *overrides: str) -> ModelClient:
    settings = settings_for(*overrides)
    return ModelClient(settings["model"], settings["provider"], server.base_url, "sk-test")


def sent(server: MockServer) -> list[dict[str, Any]]:
    return read_jsonl(Path(server.record_path))


def ask(client: ModelClient, content: str | None = "hi") -> Any:
    return client.complete([{"role": "user", "content": "RUN: echo hi"}, {"role": "assistant", "content": content}],
                           TOOLS)


@pytest.fixture
def server(tmp_path: Path):
    with MockServer(record_path=str(tmp_path / "requests.jsonl")) as s:
        yield s


# -- what reaches the wire ----------------------------------------------------------------------
def test_openrouter_routing_reasoning_sampling_through_the_cli(tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "RUN: echo one"}])
    result = run_cli(tmp_path, "model=sonnet", "distribution=terminal_only",
                     f"model.base_url={mock_server.base_url}", f"dataset.path={data}",
                     "run_name=wire", "filters=none", "provider.routing.sort=price",
                     "provider.routing.order=[anthropic,google-vertex]", "provider.routing.allow_fallbacks=false",
                     "provider.routing.data_collection=deny", "provider.routing.quantizations=[fp8,bf16]",
                     "provider.routing.require_parameters=true", "model.reasoning.effort=high",
                     "model.reasoning.exclude=true", "model.sampling.top_p=0.9", "model.sampling.seed=7",
                     "model.sampling.stop=[END]", "model.sampling.tool_choice=auto",
                     "model.sampling.parallel_tool_calls=false", "model.sampling.top_k=40",
                     env={"OPENROUTER_API_KEY": "sk-or-test"})
    assert result.returncode == 0, result.stderr
    first, *rest = read_jsonl(tmp_path / "requests.jsonl")
    body = first["body"]
    assert body["model"] == "anthropic/claude-sonnet-4.6"
    assert body["provider"] == {"sort": "price", "order": ["anthropic", "google-vertex"], "allow_fallbacks": False,
                                "data_collection": "deny", "quantizations": ["fp8", "bf16"],
                                "require_parameters": True}
    assert body["reasoning"] == {"effort": "high", "exclude": True}
    assert body["usage"] == {"include": True}
    sampling = {k: body[k] for k in ("temperature", "top_p", "max_tokens", "seed", "stop", "tool_choice",
                                     "parallel_tool_calls", "top_k")}
    assert sampling == {"temperature": 0.7, "top_p": 0.9, "max_tokens": 4096, "seed": 7, "stop": ["END"],
                        "tool_choice": "auto", "parallel_tool_calls": False, "top_k": 40}
    for absent in ("frequency_penalty", "presence_penalty", "min_p", "reasoning_effort", "only", "ignore"):
        assert absent not in body and absent not in body["provider"]
    assert first["headers"]["x-title"] == "hermes-exp" and "http-referer" in first["headers"]
    assert all(r["body"]["provider"] == body["provider"] for r in rest)


def test_a_routing_setting_is_a_sweep(tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "RUN: echo swept"}])
    result = run_cli(tmp_path, "-m", "model=sonnet", "distribution=terminal_only",
                     f"model.base_url={mock_server.base_url}", f"dataset.path={data}",
                     "run_name=sweep", "filters=none", "provider.routing.sort=price,latency",
                     env={"OPENROUTER_API_KEY": "sk-or-test"})
    assert result.returncode == 0, result.stderr
    jobs = sorted(p.parent.name for p in (tmp_path / "outputs" / "sweep").rglob("statistics.json"))
    assert len(jobs) == 2 and any("price" in j for j in jobs) and any("latency" in j for j in jobs)
    sorts = [r["body"]["provider"]["sort"] for r in read_jsonl(tmp_path / "requests.jsonl")]
    assert set(sorts) == {"price", "latency"} and sorts.count("price") == sorts.count("latency")


@pytest.mark.parametrize("overrides, expected", [
    (["model=sonnet", "model.reasoning.max_tokens=2048"], {"reasoning": {"max_tokens": 2048}}),
    (["model=sonnet", "model.reasoning.enabled=false"], {"reasoning": {"enabled": False}}),
    (["model=qwen3"], {"reasoning": {"enabled": True}, "top_k": 20, "min_p": 0.0}),
    (["model=gpt4o", "model.reasoning.effort=xhigh"], {"reasoning_effort": "xhigh"}),
    (["model=gpt4o", "model.reasoning.enabled=false"], {"reasoning_effort": "none"}),
    (["model=ollama", "model.reasoning.effort=low"], {"reasoning_effort": "low"}),
    (["model=vllm_local", "model.reasoning.enabled=false"], {"chat_template_kwargs": {"enable_thinking": False}}),
    (["model=gpt4o", "model.interop.max_tokens_key=max_completion_tokens"], {"max_completion_tokens": 4096}),
], ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_reasoning_and_interop_in_each_wire_format(server: MockServer, overrides: list[str], expected: dict) -> None:
    ask(client_for(server, *overrides))
    [record] = sent(server)
    assert {k: record["body"].get(k) for k in expected} == expected
    if "max_completion_tokens" in expected:
        assert "max_tokens" not in record["body"]


def test_interop_knobs_for_a_llamacpp_like_server(tmp_path: Path) -> None:
    with MockServer(record_path=str(tmp_path / "r.jsonl"), faults={"reject_null_content": True}) as server:
        reply = ask(client_for(server, "model=llamacpp_local"), content=None)
        assert reply.finish_reason in ("tool_calls", "stop")
        body = sent(server)[0]["body"]
        assert body["messages"][1]["content"] == "" and "parallel_tool_calls" not in body
        strict = client_for(server, "model=llamacpp_local", "model.interop.null_content_as_empty=false",
                            "model.retry.max_attempts=1", "model.interop.send_max_tokens=false")
        with pytest.raises(ProviderError, match="HTTP 500"):
            ask(strict, content=None)
        assert "max_tokens" not in sent(server)[1]["body"]


def test_tool_only_settings_are_not_sent_without_tools(server: MockServer) -> None:
    client_for(server, "model.sampling.tool_choice=required").complete([{"role": "user", "content": "x"}], [])
    assert "tool_choice" not in sent(server)[0]["body"]


@pytest.mark.parametrize("override, named", [
    ("provider.routing.sort=cheapest", ["provider.routing.sort='cheapest'", "price, throughput, latency"]),
    ("provider.routing.data_collection=maybe", ["provider.routing.data_collection", "allow, deny"]),
    ("provider.routing.quantizations=[fp7]", ["provider.routing.quantizations='fp7'", "bf16"]),
    ("model.reasoning.effort=extreme", ["model.reasoning.effort='extreme'", "none, minimal, low, medium, high, xhigh"]),
    ("model.sampling.tool_choice=sometimes", ["model.sampling.tool_choice", "auto, none, required"]),
    ("model.sampling.temperature=3", ["model.sampling.temperature=3", "between 0 and 2"]),
    ("model.rate_limit.decrease_factor=1.5", ["model.rate_limit.decrease_factor"]),
])
def test_bad_values_name_key_value_and_choices(override: str, named: list[str]) -> None:
    model = "model=gpt4o" if override.startswith("model.sampling.tool") else "model=sonnet"
    with pytest.raises(ConfigError) as info:
        check_config(settings_for(model, override))
    for text in named:
        assert text in str(info.value)


def test_reasoning_a_format_cannot_carry_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"model.reasoning.max_tokens=1024 cannot be sent with reasoning_format=openai"):
        check_config(settings_for("model=gpt4o", "model.reasoning.max_tokens=1024"))
    with pytest.raises(ConfigError, match="reasoning_format=none"):
        check_config(settings_for("model.reasoning.effort=low"))  # the mock's local provider sends none
    with pytest.raises(ConfigError, match="OpenRouter takes one or the other"):
        check_config(settings_for("model=sonnet", "model.reasoning.effort=low", "model.reasoning.max_tokens=9"))


def test_bad_routing_value_stops_the_cli_before_any_call(tmp_path: Path, mock_server) -> None:
    result = run_cli(tmp_path, "model=sonnet", "distribution=terminal_only", f"model.base_url={mock_server.base_url}",
                     "provider.routing.sort=cheapest", env={"OPENROUTER_API_KEY": "sk-or-test"})
    assert result.returncode == 2
    assert "provider.routing.sort='cheapest' is not valid; valid values: price, throughput, latency" in result.stderr
    assert not (tmp_path / "requests.jsonl").exists()


# -- retries -------------------------------------------------------------------------------------
def test_transient_failures_are_retried_until_an_answer(tmp_path: Path) -> None:
    script = ["429", "500", "502", "503", "timeout", "reset", "error_body", "error_finish"]
    with MockServer(record_path=str(tmp_path / "r.jsonl"), faults={"script": script, "hang_seconds": 1.0}) as server:
        reply = ask(client_for(server, *FAST_RETRY, "model.timeout=0.3", "model.retry.max_attempts=10"))
        assert reply.attempts == len(script) + 1 and reply.message["role"] == "assistant"
        statuses = [r["status"] for r in sent(server)]
    # the reset request was never answered (status 0); the timed-out one is answered after the client left
    assert statuses[:4] == [429, 500, 502, 503] and 0 in statuses
    assert statuses.count(200) == 3 + (len(statuses) == len(script) + 1)


def test_retry_after_is_honoured(tmp_path: Path) -> None:
    with MockServer(record_path=str(tmp_path / "r.jsonl"), faults={"script": ["429"], "retry_after_ms": 300}) as server:
        ask(client_for(server, *FAST_RETRY))
        first, second = sent(server)
    assert second["t"] - first["t"] >= 0.3  # backoff alone would have waited ~0.01 s


@pytest.mark.parametrize("status", ["400", "401", "403", "404"])
def test_non_transient_failures_fail_fast(tmp_path: Path, status: str) -> None:
    with MockServer(record_path=str(tmp_path / "r.jsonl"), faults={"always": status}) as server:
        with pytest.raises(ProviderError, match=f"HTTP {status}") as info:
            ask(client_for(server, *FAST_RETRY))
        assert server.request_count == 1 and not info.value.transient
    assert info.value.stop_run == {"401": "auth", "403": "auth", "404": "not_found"}.get(status)


def test_retries_are_bounded_in_attempts_and_in_time(tmp_path: Path) -> None:
    with MockServer(faults={"always": "503"}) as server:
        with pytest.raises(ProviderError, match="gave up after 3 attempts"):
            ask(client_for(server, *FAST_RETRY, "model.retry.max_attempts=3"))
        assert server.request_count == 3
    with MockServer(faults={"always": "429", "retry_after_ms": 5000}) as server:
        with pytest.raises(ProviderError, match="gave up after 1 attempts"):
            ask(client_for(server, "model.retry.max_wait_seconds=1"))  # Retry-After 5 s would pass the bound
        assert server.request_count == 1


def test_auth_failures_stop_the_run_early_with_one_message(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"task {i}"} for i in range(20)])
    args = [f"dataset.path={data}", "run_name=auth", "provider.api_key_env=HX_KEY", "num_workers=2"]
    with MockServer(record_path=str(tmp_path / "r.jsonl"), faults={"require_key": "sk-right"}) as server:
        result = run_cli(tmp_path, f"model.base_url={server.base_url}", *args, env={"HX_KEY": "sk-wrong"})
        calls = server.request_count
        assert result.returncode == 4, result.stderr
        assert "stopped early: 3 model calls in a row failed authentication" in result.stderr
        assert "HTTP 401" in result.stderr and "fix: check the API key in $HX_KEY" in result.stderr
        assert calls <= 6  # two workers, a few tasks dispatched ahead: not the 20 of the dataset
        fixed = run_cli(tmp_path, f"model.base_url={server.base_url}", *args, env={"HX_KEY": "sk-right"})
    assert fixed.returncode == 0, fixed.stderr  # the same command with the right key finishes every task
    stats = json.loads((tmp_path / "outputs" / "auth" / "statistics.json").read_text())
    assert stats["kept"] == 20 and stats["failed"] == 0


def test_a_model_name_the_endpoint_does_not_know_stops_the_run_early(tmp_path: Path) -> None:
    """OpenAI, vLLM and Ollama answer 404 to a wrong model name: every task would fail the same way, one
    by one. Three in a row stop the run with one message; the same command with the name fixed resumes."""
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"task {i}"} for i in range(20)])
    args = [f"dataset.path={data}", "run_name=nf", "num_workers=2"]
    with MockServer(record_path=str(tmp_path / "r.jsonl"), faults={"always": "404"}) as server:
        result = run_cli(tmp_path, f"model.base_url={server.base_url}", *args, "model.name=gpt-4oo")
        assert server.request_count <= 6, server.request_count  # not the 20 of the dataset
    assert result.returncode == 4, result.stderr
    assert "stopped early: 3 model calls in a row answered HTTP 404: no model 'gpt-4oo' at" in result.stderr
    assert "fix: check model.name" in result.stderr
    with MockServer() as server:
        fixed = run_cli(tmp_path, f"model.base_url={server.base_url}", *args, "model.name=gpt-4oo")
    assert fixed.returncode == 0, fixed.stderr
    assert json.loads((tmp_path / "outputs" / "nf" / "statistics.json").read_text())["kept"] == 20


# -- rate limiting -------------------------------------------------------------------------------
def test_429_storm_loses_no_task_and_lowers_concurrency(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"storm {i}"} for i in range(24)])
    faults = {"max_in_flight": 2, "retry_after_ms": 20}
    with MockServer(latency_ms=30, record_path=str(tmp_path / "r.jsonl"), faults=faults) as server:
        result = run_cli(tmp_path, f"model.base_url={server.base_url}", f"dataset.path={data}", "run_name=storm",
                         "num_workers=8", "filters=none", "max_turns=3", "model.rate_limit.cooldown_seconds=0.05",
                         *FAST_RETRY)
    assert result.returncode == 0, result.stderr
    stats = json.loads((tmp_path / "outputs" / "storm" / "statistics.json").read_text())
    assert stats["kept"] == 24 and stats["failed"] == 0
    records = read_jsonl(tmp_path / "r.jsonl")
    assert sum(r["status"] == 429 for r in records) > 0
    in_flight = [r["in_flight"] for r in records]
    early, late = max(in_flight[:10]), sorted(in_flight[len(in_flight) // 2:])
    # The second half's typical concurrency, not its one highest moment: on a loaded machine a request
    # the limiter let go can still be counted in flight by the mock a moment later (once 5 of 4).
    assert early > 4 and late[len(late) // 2] <= 3 and late[-1] < early, (early, late)


def test_limiter_cuts_on_429_once_per_cooldown_and_grows_back_slowly() -> None:
    limiter = RateLimiter(Limits(max_concurrency=10, cooldown_seconds=0.0))
    tickets = [limiter.acquire() for _ in range(3)]
    limiter.release(tickets[0], rate_limited=True)
    assert limiter.stats().concurrency == 8 and limiter.stats().rate_limited == 1
    limiter.release(tickets[1], rate_limited=True)
    assert limiter.stats().concurrency == 6  # int(10 * 0.8 * 0.8)
    for _ in range(12):
        limiter.release(limiter.acquire())
    assert 6 < limiter.stats().concurrency < 10  # +1/limit per success: slower than the cut
    sticky = RateLimiter(Limits(max_concurrency=10, cooldown_seconds=60))
    for _ in range(3):
        sticky.release(sticky.acquire(), rate_limited=True)
    assert sticky.stats().concurrency == 8 and sticky.stats().rate_limited == 3


def test_per_minute_caps_hold_calls_back() -> None:
    limiter = RateLimiter(Limits(max_concurrency=10, requests_per_minute=2, tokens_per_minute=1000))
    limiter.release(limiter.acquire(tokens=100), tokens=300)
    limiter.release(limiter.acquire(tokens=100), tokens=300)
    assert limiter._delay(0, 0.0 + limiter._requests[-1]) > 0  # a third request this minute must wait
    tokens_only = RateLimiter(Limits(max_concurrency=10, tokens_per_minute=1000))
    tokens_only.release(tokens_only.acquire(tokens=100), tokens=900)
    assert tokens_only._delay(200, tokens_only._tokens[-1][0]) > 0 and tokens_only._delay(50, 0) == 0
