"""Fault injection for the mock server: what real providers do to a client. A scripted fault per request
number, one fault for every request, a server-side concurrency limit that answers 429 (a rate-limit
storm), a required API key, and llama.cpp's HTTP 500 on a null message content."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hermes_exp.errors import ConfigError

Reply = tuple[int, dict[str, Any] | bytes, dict[str, str]]  # status, JSON payload (or raw bytes), extra headers
RESET = 0  # a status that means "close the connection without answering"

STATUSES = {"400": "invalid_request_error", "401": "authentication_error", "402": "insufficient_credits",
            "403": "permission_denied", "404": "model_not_found", "429": "rate_limit_exceeded",
            "500": "server_error", "502": "bad_gateway", "503": "service_unavailable"}
# "timeout": answer only after hang_seconds; "reset": drop the connection; "error_body": HTTP 200 holding
# an upstream provider's error; "error_finish": HTTP 200 whose choice ends with finish_reason "error".
# "length": HTTP 200 cut at the token limit (finish_reason "length"); "context_length": HTTP 400 saying the
# prompt exceeds the model's context, as OpenAI words it. "garbled": HTTP 200 whose tool calls are raw text,
# not a list of call objects (a model whose output the server could not parse into calls). "not_json": HTTP
# 200 saying application/json whose body is not JSON (a gateway's cut or mangled answer).
KINDS = ("ok", "timeout", "reset", "error_body", "error_finish", "length", "context_length", "garbled",
         "not_json", *STATUSES)
NOT_JSON = b"{this is not json"


def error_payload(message: str, type_: str, code: Any) -> dict[str, Any]:
    """An OpenAI-shaped error body: every error the mock server answers has this shape."""
    return {"error": {"message": message, "type": type_, "code": code}}


@dataclass
class Faults:
    script: list[str | None] = field(default_factory=list)  # fault of request N (0-based); null/"ok": none
    always: str | None = None            # fault of every request (after the script)
    max_in_flight: int | None = None     # more requests than this at once are answered 429
    retry_after_ms: float = 50.0         # sent with every 429 as Retry-After (and retry-after-ms)
    hang_seconds: float = 2.0            # how long a "timeout" waits before answering
    require_key: str | None = None       # answer 401 unless "Authorization: Bearer <require_key>"
    reject_null_content: bool = False    # answer 500 when a message has "content": null (llama.cpp)
    echo_auth: bool = False              # error messages quote the request's Authorization header (proxies do)

    def __post_init__(self) -> None:
        for kind in [*self.script, self.always]:
            if kind is not None and str(kind) not in KINDS:
                raise ConfigError(f"mock_server.faults: unknown fault {kind!r}", f"use one of: {', '.join(KINDS)}")
        self.script = [None if k is None else str(k) for k in self.script]
        self.always = None if self.always is None else str(self.always)

    def pick(self, number: int, in_flight: int, body: Any, headers: dict[str, str]) -> str | None:
        """The fault for the `number`-th chat request (0-based), arriving with `in_flight` being served."""
        if self.require_key is not None and headers.get("authorization") != f"Bearer {self.require_key}":
            return "401"
        if self.reject_null_content and isinstance(body, dict) and any(
                isinstance(m, dict) and "content" in m and m["content"] is None for m in body.get("messages") or []):
            return "null_content"
        kind = self.script[number] if number < len(self.script) else self.always
        if kind not in (None, "ok"):
            return kind
        if self.max_in_flight is not None and in_flight > self.max_in_flight:
            return "429"
        return None

    def reply(self, kind: str, headers: dict[str, str] | None = None) -> Reply | None:
        """The answer for a fault; None for the ones that change a normal answer (timeout, error_finish)."""
        answer = self._reply(kind)
        error = answer[1].get("error") if answer is not None and isinstance(answer[1], dict) else None
        if self.echo_auth and isinstance(error, dict):
            error["message"] += f" (request had Authorization: {(headers or {}).get('authorization')})"
        return answer

    def _reply(self, kind: str) -> Reply | None:
        if kind == "reset":
            return RESET, {}, {}
        if kind == "not_json":
            return 200, NOT_JSON, {}
        if kind == "null_content":
            message = "Internal Server Error: message content must not be null"
            return 500, error_payload(message, "server_error", 500), {}
        if kind == "context_length":
            error = error_payload("This model's maximum context length is 8192 tokens. However, your messages resulted "
                           "in 9120 tokens. Please reduce the length of the messages.", "invalid_request_error",
                           "context_length_exceeded")
            return 400, error, {}
        if kind == "error_body":
            error = error_payload("upstream provider overloaded", "provider_error", 502)
            error["error"]["metadata"] = {"provider_name": "MockUpstream"}
            return 200, error, {}
        if kind == "429":
            ms = self.retry_after_ms
            return 429, error_payload("injected rate limit; retry later", STATUSES[kind], 429), {
                "Retry-After": f"{ms / 1000:g}", "retry-after-ms": f"{ms:g}"}
        if kind in STATUSES:
            return int(kind), error_payload(f"injected HTTP {kind}", STATUSES[kind], int(kind)), {}
        return None


def cut_at_length(completion: dict[str, Any]) -> dict[str, Any]:
    """A completion stopped by the output-token limit: no tool call survives, the text is cut short."""
    choice = completion["choices"][0]
    choice["finish_reason"] = "length"
    message = choice["message"]
    message.pop("tool_calls", None)
    message["content"] = (message.get("content") or "")[:12]
    return completion


def finish_with_error(completion: dict[str, Any]) -> dict[str, Any]:
    """A completion whose generation failed midway upstream (OpenRouter: HTTP 200, finish_reason "error")."""
    choice = completion["choices"][0]
    choice["finish_reason"] = "error"
    choice["error"] = {"code": 502, "message": "upstream provider failed mid-generation"}
    return completion


def garble(completion: dict[str, Any]) -> dict[str, Any]:
    """A completion whose `tool_calls` is the model's raw text instead of a list of call objects."""
    message = completion["choices"][0]["message"]
    message["tool_calls"] = '<tool_call>{"name": "terminal", "arguments": {"command": "ls"</tool_call>'
    return completion


# The faults that change a normal answer instead of replacing it.
CHANGES = {"error_finish": finish_with_error, "length": cut_at_length, "garbled": garble}


def add_accounting(completion: dict[str, Any], usage_cost: dict[str, float] | None,
                   provider_name: str | None) -> dict[str, Any]:
    """What OpenRouter adds: the upstream provider that served the call and `usage.cost` in USD."""
    if provider_name:
        completion["provider"] = provider_name
    if usage_cost:
        usage = completion["usage"]
        usage.setdefault("prompt_tokens_details", {"cached_tokens": usage["prompt_tokens"] // 2})
        usage["cost"] = round((usage["prompt_tokens"] * float(usage_cost.get("prompt", 0))
                               + usage["completion_tokens"] * float(usage_cost.get("completion", 0))) / 1e6, 10)
    return completion
