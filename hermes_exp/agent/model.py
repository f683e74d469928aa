"""The model client: the only module that imports `openai`. One client per process, retries with
backoff that honours Retry-After, errors mapped to ProviderError with a ledger class."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import openai

from hermes_exp.errors import ProviderError

TRANSIENT = (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError,
             openai.APIConnectionError, openai.ConflictError)
# Request fields a model preset may set under `sampling`; null means "not sent".
SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "seed", "stop", "tool_choice",
                 "parallel_tool_calls", "frequency_penalty", "presence_penalty")


@dataclass
class Reply:
    """One model answer as plain data: the message exactly as received, plus call facts."""

    message: dict[str, Any]
    finish_reason: str | None
    usage: dict[str, Any] = field(default_factory=dict)
    served_by: dict[str, Any] = field(default_factory=dict)
    attempts: int = 1


class ModelClient:
    """Sends chat-completion requests built from the model and provider config."""

    def __init__(self, model: dict[str, Any], provider: dict[str, Any], base_url: str, api_key: str) -> None:
        self._model = model
        retry = model.get("retry") or {}
        self._max_attempts = int(retry.get("max_attempts", 5))
        self._backoff = float(retry.get("backoff_seconds", 1.0))
        self._max_wait = float(retry.get("max_wait_seconds", 60.0))
        self._client = openai.OpenAI(
            api_key=api_key, base_url=base_url, max_retries=0,
            timeout=float(model.get("timeout", 600)), default_headers=provider.get("headers") or None)
        self._request = self._static_request(model, provider)
        self._rng = random.Random()
        self._lock = threading.Lock()

    @staticmethod
    def _static_request(model: dict[str, Any], provider: dict[str, Any]) -> dict[str, Any]:
        """Everything in a request that does not change between calls, computed once."""
        sampling = model.get("sampling") or {}
        request: dict[str, Any] = {k: sampling[k] for k in SAMPLING_KEYS if sampling.get(k) is not None}
        extra = dict(provider.get("extra_body") or {})
        extra.update(model.get("extra_body") or {})
        if extra:
            request["extra_body"] = extra
        return request

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        """One call, retried on transient failures. Raises ProviderError when it gives up."""
        request = {**self._request, "model": self._model["name"], "messages": messages}
        if tools:
            request["tools"] = tools
        elif "tool_choice" in request or "parallel_tool_calls" in request:
            request = {k: v for k, v in request.items() if k not in ("tool_choice", "parallel_tool_calls")}
        deadline = time.monotonic() + self._max_wait
        for attempt in range(1, self._max_attempts + 1):
            try:
                response = self._client.chat.completions.create(**request)
                return self._reply(response, attempt)
            except TRANSIENT as exc:
                wait = self._wait(exc, attempt)
                if attempt == self._max_attempts or time.monotonic() + wait > deadline:
                    raise ProviderError(f"{_describe(exc)} (gave up after {attempt} attempts)", transient=True) from exc
                time.sleep(wait)
            except openai.APIStatusError as exc:
                raise ProviderError(_describe(exc), transient=False) from exc
        raise AssertionError("unreachable")

    def _wait(self, exc: Exception, attempt: int) -> float:
        retry_after = _retry_after(exc)
        if retry_after is not None:
            return retry_after
        with self._lock:
            jitter = self._rng.uniform(0.5, 1.5)
        return min(self._backoff * 2 ** (attempt - 1) * jitter, 30.0)

    @staticmethod
    def _reply(response: Any, attempt: int) -> Reply:
        if not response.choices:
            raise ProviderError("the provider returned no choices", transient=True)
        choice = response.choices[0]
        message = choice.message.model_dump(exclude_none=True)
        usage = response.usage.model_dump(exclude_none=True) if response.usage else {}
        served = {"model": getattr(response, "model", None), "provider": getattr(response, "provider", None)}
        return Reply(message, choice.finish_reason, usage, {k: v for k, v in served.items() if v}, attempt)


def _retry_after(exc: Exception) -> float | None:
    """Seconds the server asked us to wait (`retry-after-ms` or `retry-after` in seconds)."""
    response = getattr(exc, "response", None)
    if response is None:
        return None
    for header, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = response.headers.get(header)
        try:
            if value is not None:
                return max(0.0, min(float(value) * scale, 120.0))
        except ValueError:
            continue
    return None


def _describe(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    kind = type(exc).__name__
    message = getattr(exc, "message", None) or str(exc)
    return f"{kind} (HTTP {status}): {message}" if status else f"{kind}: {message}"
