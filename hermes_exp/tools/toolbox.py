"""One task's tools: the run's registry bound to the task's sandbox, model client and resources."""

from __future__ import annotations

from typing import Any

from hermes_exp.sandbox.base import Sandbox
from hermes_exp.tools.base import Resources, ToolContext
from hermes_exp.tools.registry import Registry


class Toolbox:
    """What the agent loop calls tools through. `close()` closes the task's own resources (a browser
    context, background processes); the worker calls it right before closing the sandbox."""

    def __init__(self, registry: Registry, sandbox: Sandbox, limits: dict[str, Any], resources: Resources,
                 services: str | None = None, model: Any = None, settings: dict[str, Any] | None = None) -> None:
        self.registry = registry
        self.ctx = ToolContext(sandbox=sandbox, limits=limits, resources=resources, task=Resources(),
                               services=services, model=model, settings=settings or {})

    @property
    def sandbox(self) -> Sandbox:
        return self.ctx.sandbox

    @property
    def model_calls(self) -> list[dict[str, Any]]:
        """Usage of the model calls tools made for this task (vision), counted in its cost."""
        return self.ctx.model_calls

    def call(self, name: str, raw_args: str | None, offered: list[str]) -> tuple[str, bool]:
        return self.registry.call(self.ctx, name, raw_args, offered)

    def close(self) -> None:
        self.ctx.task.close()
