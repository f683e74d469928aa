"""OpenTelemetry traces (`tracing.*`): the options and their start-up checks, each process's tracer (its
own OTLP/HTTP exporter, or the tracer provider the program installed) and the span of each task, parent of
its model and tool calls' spans (agent/spans.py). The SDK is the `tracing` extra, imported only when
tracing is on; a run that does not trace never imports OpenTelemetry."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from hermes_exp.errors import ConfigError
from hermes_exp.optional import require
from hermes_exp.settings.redact import Redactor
from hermes_exp.settings.sections import Section

KEYS = ("otlp_endpoint", "global_provider", "content")
TRACES_PATH = "/v1/traces"  # OTLP/HTTP's path for traces, added to a collector's base URL
FLUSH_MILLIS = 5000  # how long a worker process waits for its task's spans to leave
EXTRA_FIX = ("pip install 'hermes-exp[tracing]' (the OpenTelemetry SDK and its OTLP/HTTP exporter), "
             "or set tracing.otlp_endpoint=null")


@dataclass(frozen=True)
class TracingOptions:
    """`endpoint`: the OTLP/HTTP traces URL of hermes-exp's own exporter; `global_provider`: spans go to
    the tracer provider the program installed instead; `content`: messages and tool I/O on spans too."""

    endpoint: str | None
    global_provider: bool
    content: bool

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> TracingOptions | None:
        """The run's tracing options; None when it does not trace (the default)."""
        section = Section("tracing", settings.get("tracing")).only(KEYS)
        endpoint = section.raw.get("otlp_endpoint")
        endpoint = None if endpoint is None else traces_url(endpoint)
        global_provider = section.flag("global_provider", False)
        content = section.flag("content", False)
        if endpoint and global_provider:
            raise ConfigError("tracing.otlp_endpoint and tracing.global_provider=true both say where spans go",
                              "keep one: the endpoint (hermes-exp exports) or the global provider (your program does)")
        return cls(endpoint, global_provider, content) if endpoint or global_provider else None


def wanted(settings: dict[str, Any]) -> bool:
    """Whether the run traces (what from_settings checks, without the checking: once per task)."""
    section = settings.get("tracing") or {}
    return bool(section.get("otlp_endpoint") or section.get("global_provider"))


def traces_url(value: Any) -> str:
    """The collector's URL as OTLP/HTTP's traces URL: `/v1/traces` added unless it ends with it already."""
    parts = urlsplit(value) if isinstance(value, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"tracing.otlp_endpoint={value!r} is not an http(s) URL",
                          "set tracing.otlp_endpoint=http://localhost:4318 (an OTLP/HTTP collector; "
                          f"{TRACES_PATH} is added), or null to trace nothing")
    return value if parts.path.rstrip("/").endswith(TRACES_PATH) else value.rstrip("/") + TRACES_PATH


def check(settings: dict[str, Any]) -> None:
    """At start-up: the tracing options, and OpenTelemetry installed when they turn tracing on."""
    options = TracingOptions.from_settings(settings)
    if options is None:
        return
    missing = ConfigError("tracing is on (tracing.otlp_endpoint or tracing.global_provider) but the "
                          "OpenTelemetry SDK is not installed", EXTRA_FIX)
    require("opentelemetry.trace", missing)
    if options.endpoint:
        require("opentelemetry.sdk.trace.export", missing)
        require("opentelemetry.exporter.otlp.proto.http.trace_exporter", missing)


def probe(settings: dict[str, Any], timeout: float = 5.0) -> None:
    """Before the first task: the collector is reachable (a TCP connection, no request), so a wrong
    endpoint is one clear error, not a warning per batch of spans while the run goes on untraced."""
    options = TracingOptions.from_settings(settings)
    if options is None or not options.endpoint:
        return
    parts = urlsplit(options.endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            return
    except OSError as exc:
        raise ConfigError(f"cannot reach the OTLP collector at tracing.otlp_endpoint={options.endpoint} "
                          f"({parts.hostname}:{port}: {exc.strerror or type(exc).__name__})",
                          "start the collector, fix tracing.otlp_endpoint, or set it to null") from exc


class Tracer:
    """A process's tracer for one run. `start` opens a task's span; `end` closes it with the result's
    facts (and, in a worker process other than the runner's, sends the spans before the result goes
    back: such a process is never told that the run ended); `close` flushes and shuts down at the end."""

    def __init__(self, options: TracingOptions, settings: dict[str, Any]) -> None:
        from opentelemetry import trace

        self.options = options
        self._own = _own_provider(options.endpoint, settings) if options.endpoint else None
        self._provider = self._own or trace.get_tracer_provider()
        self._tracer = self._provider.get_tracer("hermes_exp")
        self.request = request_attributes(settings)
        self.run = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": str(settings.get("run_name") or ""),
                    "hermes_exp.run_name": str(settings.get("run_name") or "")}
        self.redact = Redactor.from_env(settings)
        self._runner = os.getpid() == (settings.get("invocation") or {}).get("parent_pid")

    @classmethod
    def for_settings(cls, settings: dict[str, Any]) -> Tracer | None:
        options = TracingOptions.from_settings(settings)
        return None if options is None else cls(options, settings)

    def start(self, task: Any) -> Any:
        """The span of `task` (a dataset.tasks.Task), begun now: an agent.spans.TaskTrace."""
        from hermes_exp.agent.spans import TaskTrace

        attributes = {**self.run, **_model_of(self.request), "gen_ai.conversation.id": task.key,
                      "hermes_exp.task.key": task.key, "hermes_exp.task.index": task.index,
                      "hermes_exp.task.sample": task.sample}
        span = self._tracer.start_span(f"invoke_agent {self.run['gen_ai.agent.name']}".strip(), attributes=attributes)
        return TaskTrace(self._tracer, span, self.request, self.options.content, self.redact)

    def end(self, task_trace: Any, result: Any) -> None:
        """Close the task's span with what its result (a worker.result.TaskResult) says."""
        from opentelemetry.trace import Status, StatusCode

        span = task_trace.span
        span.set_attributes(task_attributes(result))
        if result.state == "error":
            span.set_attribute("error.type", str(result.error_class or "internal"))
            span.set_status(Status(StatusCode.ERROR, self.redact(str(result.error or ""))[:500]))
        span.end()
        if not self._runner:
            self.flush()

    def flush(self) -> None:
        flush = getattr(self._provider, "force_flush", None)  # the API's default provider has none
        if flush is not None:
            flush(FLUSH_MILLIS)

    def close(self) -> None:
        if self._own is not None:
            self._own.shutdown()  # flushes what is left
        else:
            self.flush()


def _own_provider(endpoint: str, settings: dict[str, Any]) -> Any:
    """hermes-exp's own provider: spans batched to the endpoint over OTLP/HTTP (protobuf). Headers
    (a collector's key) come from OTEL_EXPORTER_OTLP_HEADERS, read by the exporter: never from config."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    service = os.environ.get("OTEL_SERVICE_NAME") or "hermes-exp"
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return provider


def request_attributes(settings: dict[str, Any]) -> dict[str, Any]:
    """What every model call of the run asks: operation, provider, model, sampling, server."""
    model, provider = settings.get("model") or {}, settings.get("provider") or {}
    out: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": str(provider.get("name") or "openai"),
                           "gen_ai.request.model": str(model.get("name") or "")}
    sampling = model.get("sampling") or {}
    for key in ("temperature", "top_p", "max_tokens", "seed", "frequency_penalty", "presence_penalty"):
        value = sampling.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[f"gen_ai.request.{key}"] = value
    parts = urlsplit(str((settings.get("invocation") or {}).get("base_url") or ""))
    if parts.hostname:
        out["server.address"] = parts.hostname
        out["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)
    return out


def _model_of(request: dict[str, Any]) -> dict[str, Any]:
    return {k: request[k] for k in ("gen_ai.provider.name", "gen_ai.request.model") if k in request}


def task_attributes(result: Any) -> dict[str, Any]:
    """A finished task's facts on its span: state, stop reason, calls, tokens, cost, the verdict."""
    usage = result.usage or []
    out: dict[str, Any] = {"hermes_exp.state": str(result.state or ""), "hermes_exp.api_calls": int(result.api_calls or 0),
                           "hermes_exp.cost_usd": float(result.spent_usd or 0.0),
                           "hermes_exp.task.attempts": int(result.task_attempts or 1),
                           "gen_ai.usage.input_tokens": sum(int(u.get("prompt_tokens") or 0) for u in usage),
                           "gen_ai.usage.output_tokens": sum(int(u.get("completion_tokens") or 0) for u in usage)}
    for key in ("stop_reason", "error_class"):
        if getattr(result, key, None):
            out[f"hermes_exp.{key}"] = str(getattr(result, key))
    if result.toolsets is not None:
        out["hermes_exp.toolsets"] = [str(t) for t in result.toolsets]
    score = result.score or {}
    for key in ("reward", "passed"):
        if isinstance(score.get(key), (bool, int, float)):
            out[f"hermes_exp.{key}"] = score[key]
    return out
