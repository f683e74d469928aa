"""Which of a distribution's toolsets a run can draw: every drawable toolset must be defined and its
backend configured, said at start-up in one message, never found after hundreds of failed calls."""

from __future__ import annotations

import logging
from typing import Any

from hermes_exp.tools.distribution import validate
from hermes_exp.errors import ConfigError
from hermes_exp.tools.registry import Registry

log = logging.getLogger(__name__)


def uses_mock(settings: dict[str, Any]) -> bool:
    """The run talks to the mock model, whose server also stands in for every tool backend left unset."""
    return bool((settings.get("model") or {}).get("mock_server"))


def services_url(settings: dict[str, Any]) -> str | None:
    """The mock server's root URL (search, images, a small web site) when the run uses the mock model."""
    if not uses_mock(settings):
        return None
    base = str((settings.get("invocation") or {}).get("base_url") or "").rstrip("/")
    return base.removesuffix("/v1") or None


def problems(registry: Registry, toolsets: dict[str, float], mock: bool) -> dict[str, list[str]]:
    """toolset -> why it cannot be used, for each toolset that can be drawn (probability above 0)."""
    found: dict[str, list[str]] = {}
    for name, prob in toolsets.items():
        if prob <= 0:
            continue
        toolset = registry.toolsets.get(name)
        if toolset is None:
            found[name] = [f"no such toolset is defined (known: {', '.join(registry.toolsets)}); add "
                           f"conf/toolset/{name}.yaml and +toolset@toolsets.{name}={name}"]
            continue
        why = _grouped({tool: reason for tool, t in toolset.tools.items() if (reason := t.missing(mock))},
                       len(toolset.tools))
        if why:
            found[name] = why
    return found


def _grouped(reasons: dict[str, str], tools: int) -> list[str]:
    """One line per reason (10 browser tools that all need playwright say so once)."""
    by_reason: dict[str, list[str]] = {}
    for tool, reason in reasons.items():
        by_reason.setdefault(reason, []).append(tool)
    return [f"{'all its tools' if len(names) == tools > 1 else ', '.join(names)}: {reason}"
            for reason, names in by_reason.items()]


def drawable(settings: dict[str, Any], registry: Registry, warn: bool = False) -> dict[str, float]:
    """The validated distribution the run draws from. With a real model every toolset it can draw must
    be usable, else the run is refused in one message. The offline demo (mock model) leaves out, with
    one warning, a toolset it cannot run here (not defined, or an optional package missing)."""
    dist = settings.get("distribution") or {}
    name = dist.get("name", "?")
    toolsets = validate(name, dist.get("toolsets") or {})
    mock = uses_mock(settings)
    found = problems(registry, toolsets, mock)
    remaining = {ts: p for ts, p in toolsets.items() if ts not in found}
    if mock and found and max(remaining.values(), default=0) > 0:
        if warn:
            why = "; ".join(f"{ts} ({'; '.join(r)})" for ts, r in found.items())
            log.warning("distribution %r: the offline demo leaves out toolset(s) it cannot run here: %s", name, why)
        return remaining
    if found:
        lines = "\n".join(f"  - {ts}: {'; '.join(why)}" for ts, why in found.items())
        raise ConfigError(
            f"distribution {name!r} can draw toolset(s) that cannot be used:\n{lines}",
            "configure them as said above (keys come from environment variables named in config), or choose "
            "another distribution (hermes-exp --list-distributions), or leave one out with "
            f"distribution.toolsets.{next(iter(found))}=0")
    return toolsets
