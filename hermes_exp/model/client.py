"""The model client. One client per process and run, shared by its workers: it builds each request from
config (model/wire.py), waits for the shared rate limiter, reserves the call's worst-case cost against the
budget, sends it (model/transport.py), retries transient failures, and prices usage."""

from __future__ import annotations

import itertools
import json
import random
import threading
import time
from dataclasses import dataclass, field
from sys import intern
from typing import Any

from hermes_exp.model.cache import CacheControl
from hermes_exp.model.encode import Body
from hermes_exp.model.ratelimit import Limits, RateLimiter
from hermes_exp.model.retry import AuthCircuit, Failure, RetryPolicy, upstream_failure
from hermes_exp.model.tokens import TokenData
from hermes_exp.model.transport import AttemptFailed, Transport
from hermes_exp.model.wire import SAMPLING_KEYS, Interop, call_request, static_request
from hermes_exp.money.booking import Booking
from hermes_exp.money.broker import BrokerClient, booking_for
from hermes_exp.money.budget import Budget, BudgetLimits, TaskMeter
from hermes_exp.money.cost import Pricing, usage_facts, worst_case

__all__ = ["SAMPLING_KEYS", "ModelClient", "Reply", "TaskClient"]


@dataclass
class Reply:
    """One model answer as plain data: the message exactly as received, plus call facts."""

    message: dict[str, Any]
    finish_reason: str | None
    usage: dict[str, Any] = field(default_factory=dict)
    served_by: dict[str, Any] = field(default_factory=dict)
    attempts: int = 1
    tokens: dict[str, Any] = field(default_factory=dict)  # token IDs and logprobs, when asked and returned


class ModelClient:
    """Sends chat-completion requests built from the model and provider config."""

    def __init__(self, model: dict[str, Any], provider: dict[str, Any], base_url: str, api_key: str,
                 workers: int = 4, limits: BudgetLimits | None = None,
                 booking: Booking | BrokerClient | None = None, processes: int = 1) -> None:
        self._policy = RetryPolicy.from_config(model.get("retry"))
        self._interop = Interop.from_config(model.get("interop"))
        self._request = static_request(model, provider)
        self._tokens = TokenData.from_config(model)
        self._cache = CacheControl.from_config(model.get("cache_control"))
        self._pricing = Pricing.from_config(model.get("pricing"))
        self._limits = limits or BudgetLimits()
        self._completion_cap = self._limits.completion_tokens(model)
        self.booking = booking or Booking(Budget(self._limits.max_cost_usd))  # the budgets and the spend journal
        self.limiter = RateLimiter(Limits.from_config(model.get("rate_limit"), workers).share(processes))
        self.circuit = AuthCircuit(self._policy.stop_after_auth_failures)
        # a trickling server cannot outlast model.timeout: it bounds each attempt as a whole
        self._transport = Transport(base_url, api_key, provider.get("headers"), float(model.get("timeout", 600)))
        self._rng = random.Random()
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: dict[str, Any], api_key: str) -> ModelClient:
        """The process's client for a run: it books calls in the parent's broker (a worker process), or in
        budgets seeded with what the ledger says was already spent (the parent).
        The caller reads the key (settings.api_key), so the client never reaches back into settings."""
        invocation = settings["invocation"]
        limits = BudgetLimits.from_settings(settings)
        return cls(settings["model"], settings["provider"], invocation["base_url"], api_key,
                   workers=int(settings.get("num_workers") or 4), limits=limits,
                   booking=booking_for(settings, limits.max_cost_usd), processes=int(invocation.get("processes") or 1))

    def for_task(self, key: str | None = None) -> TaskClient:
        return TaskClient(self, TaskMeter(self._limits.max_task_cost_usd, key))

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                 meter: TaskMeter | None = None) -> Reply:
        """One call, retried on transient failures. Raises ProviderError when it gives up."""
        if self._cache is not None:
            messages = self._cache.mark(messages)
        body = Body(call_request(self._request, messages, tools, self._interop))
        worst = worst_case(self._pricing, body.prompt_tokens, self._completion_cap)
        if meter is not None:
            meter.check(worst)
        ticket = self.booking.reserve(worst, meter.key if meter is not None else None)
        reply: Reply | None = None
        try:
            reply = self._call(body)
        finally:
            self.booking.settle(ticket, reply.usage["cost_usd"] if reply else 0.0)
        if meter is not None:
            meter.add(reply.usage)
        return reply

    def _call(self, body: Body) -> Reply:
        deadline = time.monotonic() + self._policy.max_wait_seconds
        for attempt in itertools.count(1):
            self.circuit.check()
            outcome = self._attempt(body, attempt)
            if isinstance(outcome, Reply):
                self.circuit.record(None)
                return outcome
            self.circuit.record(outcome)
            if not outcome.transient or attempt >= self._policy.max_attempts:
                raise outcome.error(attempt)
            with self._lock:
                wait = self._policy.wait(attempt, outcome.retry_after, self._rng)
            if time.monotonic() + wait > deadline:
                raise outcome.error(attempt)
            time.sleep(wait)
        raise AssertionError("unreachable")

    def _attempt(self, body: Body, attempt: int) -> Reply | Failure:
        """One HTTP attempt inside a rate-limiter slot: a Reply, or the Failure to decide on."""
        ticket = self.limiter.acquire(body.prompt_tokens)
        failure: Failure | None = None
        tokens: int | None = None
        try:
            # the body is already plain JSON (model/encode.py) and the answer is read as plain JSON:
            # the SDK's models are not built for either
            response = _decoded(self._transport.post(body.take()))
            failure = _in_body_failure(response)
            if failure is None:
                reply = self._reply(response, attempt)
                tokens = reply.usage.get("total_tokens")
                return reply
        except AttemptFailed as exc:  # an error status, a failed exchange, no whole answer in time
            failure = exc.failure
        finally:
            self.limiter.release(ticket, rate_limited=failure is not None and failure.rate_limited, tokens=tokens)
        return failure

    def _reply(self, response: dict[str, Any], attempt: int) -> Reply:
        choice = response["choices"][0]
        message = _without_none(choice.get("message") or {})
        raw_usage = _without_none(response.get("usage") or {})
        served = {"model": response.get("model"), "provider": response.get("provider")}
        tokens = self._tokens.extract(response, choice) if self._tokens.wanted else {}
        return Reply(message, choice.get("finish_reason"), usage_facts(raw_usage, self._pricing),
                     {k: v for k, v in served.items() if v}, attempt, tokens)


def _decoded(content: bytes) -> Any:
    """A 2xx answer's JSON, or the Failure of a body that is not JSON (a proxy's page, a cut answer):
    the provider's fault, retried like a 5xx."""
    try:
        return json.loads(content)
    except ValueError as exc:  # includes bytes that are not UTF-8
        start = content[:80].decode("utf-8", "replace")
        return Failure(f"the provider answered with a body that is not JSON ({exc}): {start!r}", 502)


def _without_none(value: Any) -> Any:
    """JSON with null members dropped, as the SDK's model_dump(exclude_none=True) gave it. Only
    objects and arrays are descended into (a call per string or number was most of its time). Member
    names are interned: json.loads makes each answer's own copies of "role", "tool_calls", "function"...,
    and a session keeps every assistant message until its task ends (~0.4 KB each otherwise)."""
    if isinstance(value, dict):
        return {intern(k): _without_none(v) if isinstance(v, (dict, list)) else v for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) if isinstance(v, (dict, list)) else v for v in value]
    return value


class TaskClient:
    """One task's view of the shared client: the same `complete`, plus the task's spend (`meter`)."""

    def __init__(self, client: ModelClient, meter: TaskMeter) -> None:
        self.client = client
        self.meter = meter

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        return self.client.complete(messages, tools, self.meter)


def _in_body_failure(response: Any) -> Failure | None:
    """An HTTP 200 that is not an answer: not JSON, an error object instead of choices, or finish_reason "error"."""
    if isinstance(response, Failure):
        return response
    if not isinstance(response, dict):
        return Failure(f"the provider answered with {type(response).__name__} JSON, not a completion", 502)
    failure = upstream_failure(response)
    if failure is not None:
        return failure
    choices = response.get("choices")
    if not choices or not isinstance(choices[0], dict):
        return Failure("the provider returned no choices", 502)
    choice = choices[0]
    if choice.get("finish_reason") == "error":
        error = choice.get("error")
        return upstream_failure({"error": error if isinstance(error, dict) else {"message": "finish_reason=error"}})
    return None

