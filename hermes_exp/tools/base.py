"""What every tool is (a Protocol with an explicit JSON schema) and what a call gets: the ToolContext,
with the prompt's sandbox, the process's shared resources and the task's own resources."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from hermes_exp.errors import ToolError
from hermes_exp.sandbox.base import Sandbox

T = TypeVar("T")


def function_schema(name: str, description: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """An OpenAI function schema (the `function` member of a `tools` entry)."""
    return {"name": name, "description": description,
            "parameters": {"type": "object", "properties": props, "required": required}}


class Tool(Protocol):
    """One tool, built from its `conf/toolset/<set>.yaml` entry (`_target_` + settings) once per process.

    `schema` is the explicit JSON schema offered to the model. `missing(mock)` says, as one sentence
    with the config key to set, why the backend cannot be used (None when it can); `mock` is true when the
    run uses the mock model, whose server stands in for every backend left unset (its root URL is
    `ctx.services` at call time). `__call__` returns a JSON-able dict (failures as `{"error": ...}`, or by raising ToolError);
    an exception other than ToolError is a bug and fails the task. Constructors open nothing: shared
    resources are opened lazily through `ctx.resources`, per-task ones through `ctx.task`."""

    schema: dict[str, Any]

    def missing(self, mock: bool) -> str | None: ...

    def __call__(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]: ...


class Resources:
    """Opened at most once per key, closed in reverse order by `close()`. Thread-safe.

    The worker's per-process runtime holds one (HTTP clients, a browser process, MCP stdio servers),
    closed by `worker.release`; each task holds one (a browser context, background processes), closed
    right before its sandbox, whatever happened."""

    def __init__(self) -> None:
        self._items: dict[str, tuple[Any, Callable[[Any], None] | None]] = {}
        self._lock = threading.Lock()

    def get(self, key: str, open_: Callable[[], T], close: Callable[[T], None] | None = None) -> T:
        with self._lock:
            if key not in self._items:
                self._items[key] = (open_(), close)
            return self._items[key][0]

    def drop(self, key: str) -> None:
        """Close one resource now (e.g. a browser that died), so the next `get` opens a fresh one."""
        with self._lock:
            value, close = self._items.pop(key, (None, None))
        if close is not None:
            close(value)

    def close(self) -> None:
        with self._lock:
            items, self._items = list(self._items.values()), {}
        errors = []
        for value, close in reversed(items):
            if close is None:
                continue
            try:
                close(value)
            except Exception as exc:  # one failing close must not leak the others
                errors.append(exc)
        if errors:
            raise errors[0]


@dataclass
class ToolContext:
    """What one tool call may use. `model` is the task's model client (budget and task cap counted);
    `model_calls` collects the usage of model calls that tools make (vision), kept with the sample;
    `settings` is the run's resolved config (with `invocation`: this invocation's facts, e.g. the model's base_url)."""

    sandbox: Sandbox
    limits: dict[str, Any]
    resources: Resources
    task: Resources
    services: str | None = None
    model: Any = None
    settings: dict[str, Any] = field(default_factory=dict)
    model_calls: list[dict[str, Any]] = field(default_factory=list)


def text_arg(args: dict[str, Any], name: str, allow_empty: bool = False) -> str:
    value = args.get(name)
    if not isinstance(value, str) or (not allow_empty and value == ""):
        raise ToolError(f"'{name}' must be a {'' if allow_empty else 'non-empty '}string")
    return value


def int_arg(args: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = args.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise ToolError(f"'{name}' must be an integer from {low} to {high}, got {value!r}")
    return min(max(int(value), low), high)
