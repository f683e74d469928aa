"""Spans of one task's conversation (`tracing.*`; worker/tracing.py sets them up): one per model call and one
per tool call, children of the task's span, with the OpenTelemetry GenAI semantic conventions' attributes.
Messages, tool arguments and results go on spans only with `tracing.content=true`. Only a run that traces
imports this module (and so OpenTelemetry's API)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from hermes_exp.model.reasoning import native_reasoning

NS_PER_SECOND = 1_000_000_000
MAX_DESCRIPTION = 500  # characters of an error kept as a span's status description


class TaskTrace:
    """One task's span (`span`) and what its children share: the tracer, the attributes of every model
    call's request (`request`), whether content goes on spans, and the run's redaction of secret values."""

    def __init__(self, tracer: Tracer, span: Span, request: dict[str, Any], content: bool,
                 redact: Callable[[str], str]) -> None:
        self.tracer, self.span, self.request, self.content, self.redact = tracer, span, request, content, redact
        self._parent = trace.set_span_in_context(span)

    def model_call(self, started: float, sent: list[dict[str, Any]], reply: Any = None,
                   error: BaseException | None = None) -> None:
        """The span of one model call (its retries included) that began at `started` (time.time()) and
        ended now: `reply` (a model.client.Reply) or the `error` it raised. `sent`: the saved conversation
        it continued (the ephemeral system prompt and prefill are never saved, so never on a span)."""
        span = self._child(f"chat {self.request.get('gen_ai.request.model', '')}".strip(), SpanKind.CLIENT,
                           started, self.request)
        if self.content:
            span.set_attribute("gen_ai.input.messages", self._json([_message(m) for m in sent]))
        if reply is not None:
            span.set_attributes(_reply_attributes(reply))
            if self.content:
                out = {**_message({**reply.message, "role": "assistant"}), "finish_reason": reply.finish_reason or ""}
                span.set_attribute("gen_ai.output.messages", self._json([out]))
        if error is not None:
            self._failed(span, type(error).__name__, str(error), getattr(error, "error_class", None))
        span.end()

    def tool_call(self, started: float, call: dict[str, Any], content: str | None = None, valid: bool = True,
                  failed: bool = False, error: BaseException | None = None) -> None:
        """The span of one tool call that began at `started` and ended now: its result `content`
        (`valid`: a tool offered, with a JSON object of arguments; `failed`: an error result), or the
        `error` it raised (a sandbox failure, which ends the task)."""
        fn = call.get("function") or {}
        name = str(fn.get("name") or "")
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.type": "function"}
        if call.get("id"):
            attributes["gen_ai.tool.call.id"] = str(call["id"])
        span = self._child(f"execute_tool {name}".strip(), SpanKind.INTERNAL, started, attributes)
        if self.content:
            span.set_attribute("gen_ai.tool.call.arguments", self.redact(str(fn.get("arguments") or "")))
            if content is not None:
                span.set_attribute("gen_ai.tool.call.result", self.redact(content))
        if error is not None:
            self._failed(span, type(error).__name__, str(error), getattr(error, "error_class", None))
        elif not valid:
            self._failed(span, "invalid_tool_call", "a tool not offered, or arguments that are not a JSON object")
        elif failed:
            self._failed(span, "tool_error", "the tool returned an error result")
        span.end()

    def _child(self, name: str, kind: SpanKind, started: float, attributes: dict[str, Any]) -> Span:
        return self.tracer.start_span(name, self._parent, kind, attributes, start_time=int(started * NS_PER_SECOND))

    def _failed(self, span: Span, error_type: str, text: str, error_class: str | None = None) -> None:
        span.set_attribute("error.type", error_type)
        if error_class:
            span.set_attribute("hermes_exp.error_class", error_class)
        span.set_status(Status(StatusCode.ERROR, self.redact(text)[:MAX_DESCRIPTION]))

    def _json(self, value: Any) -> str:
        return self.redact(json.dumps(value, ensure_ascii=False))


def _reply_attributes(reply: Any) -> dict[str, Any]:
    """What a reply says of itself: served model, finish reason, tokens, cost, attempts."""
    usage = reply.usage or {}
    out: dict[str, Any] = {"hermes_exp.attempts": int(reply.attempts)}
    for key, name in (("prompt_tokens", "gen_ai.usage.input_tokens"), ("completion_tokens", "gen_ai.usage.output_tokens"),
                      ("reasoning_tokens", "hermes_exp.usage.reasoning_tokens"),
                      ("cached_tokens", "hermes_exp.usage.cached_tokens")):
        if isinstance(usage.get(key), int) and not isinstance(usage.get(key), bool):
            out[name] = usage[key]
    if isinstance(usage.get("cost_usd"), (int, float)):
        out["hermes_exp.cost_usd"] = float(usage["cost_usd"])
        out["hermes_exp.cost_source"] = str(usage.get("cost_source") or "")
    if reply.finish_reason:
        out["gen_ai.response.finish_reasons"] = [str(reply.finish_reason)]
    for key, name in (("model", "gen_ai.response.model"), ("provider", "hermes_exp.served_by.provider")):
        if reply.served_by.get(key):
            out[name] = str(reply.served_by[key])
    return out


def _message(message: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI-format message as the GenAI conventions write one: a role and its parts."""
    role = message.get("role") or ""
    if role == "tool":
        return {"role": role, "parts": [{"type": "tool_call_response", "id": message.get("tool_call_id") or "",
                                         "response": message.get("content")}]}
    parts: list[dict[str, Any]] = []
    reasoning = native_reasoning(message)
    if reasoning:
        parts.append({"type": "reasoning", "content": reasoning})
    content = message.get("content")
    if isinstance(content, str) and content:
        parts.append({"type": "text", "content": content})
    elif isinstance(content, list):  # content parts: text kept, an image named by its type only
        parts += [{"type": "text", "content": p.get("text", "")} if p.get("type") == "text" else {"type": str(p.get("type"))}
                  for p in content if isinstance(p, dict)]
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        parts.append({"type": "tool_call", "id": call.get("id") or "", "name": fn.get("name") or "",
                      "arguments": _arguments(fn.get("arguments"))})
    return {"role": role, "parts": parts}


def _arguments(raw: Any) -> Any:
    """A call's arguments as an object where they parse, else the text the model wrote."""
    try:
        return json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return raw
