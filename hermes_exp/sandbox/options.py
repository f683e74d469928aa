"""The sandbox section's values, read by one reader for every backend: each bad value is refused with
its key (sandbox.<key>), the value, what is valid and the fix. The run checks the section before it
touches the run directory (`check`), and each factory reads its values through the same functions, so
a value a factory would misread (sandbox.cpus=-1, sandbox.network=maybe) never gets that far."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from hermes_exp.settings.sections import Section
from hermes_exp.errors import ConfigError

TARGETS = {  # the backends this module reads; a user's own _target_ reads its own settings
    "hermes_exp.sandbox.local.LocalSandboxFactory": "local",
    "hermes_exp.sandbox.bwrap.BwrapSandboxFactory": "bwrap",
    "hermes_exp.sandbox.auto.AutoSandboxFactory": "bwrap",  # auto builds bwrap or local from the same keys
    "hermes_exp.sandbox.docker.DockerSandboxFactory": "docker",
}


def section(raw: Mapping[str, Any]) -> Section:
    return Section("sandbox", raw)


def host(raw: Mapping[str, Any]) -> dict[str, Any]:
    """local's values: root, output_limit, keep, env."""
    s = section(raw)
    return {"root": _text(s, "root", None), "output_limit": _output_limit(s), "keep": s.flag("keep", False),
            "env": _env(s)}


def bwrap(raw: Mapping[str, Any]) -> dict[str, Any]:
    """bwrap's values: local's, and the limits (0 = none for each)."""
    s = section(raw)
    return {**host(raw),
            "memory_mb": s.number("memory_mb", 4096, low=0, integer=True, unit="MB; 0 = no limit"),
            "cpu_seconds": s.number("cpu_seconds", 600, low=0, integer=True, unit="CPU seconds per process; 0 = none"),
            "pids_limit": s.number("pids_limit", 512, low=0, integer=True, unit="processes; 0 = no limit")}


def docker(raw: Mapping[str, Any]) -> dict[str, Any]:
    """docker's values (the engine's own meaning: pids_limit 0 = no limit)."""
    s = section(raw)
    return {
        "image": _text(s, "image", "python:3.11-slim", required=True), "network": s.flag("network", False),
        "memory_mb": s.number("memory_mb", 2048, integer=True, positive=True, unit="MB"),
        "cpus": s.number("cpus", 1.0, positive=True, unit="CPUs, e.g. 0.5"),
        "pids_limit": s.number("pids_limit", 256, low=0, integer=True, unit="processes; 0 = no limit"),
        "read_only": s.flag("read_only", False),
        "max_sandboxes": s.number("max_sandboxes", 8, low=0, integer=True, unit="live containers; 0 = no cap"),
        "pull_timeout": s.number("pull_timeout", 300, positive=True, unit="seconds"),
        "max_builds": s.number("max_builds", 2, low=1, integer=True, unit="images built at once"),
        "rebuild": s.flag("rebuild", False),
        "max_starts_per_second": s.number("max_starts_per_second", 0.0, low=0, unit="starts per second; 0 = no cap"),
        "warm_pool": s.number("warm_pool", 0, low=0, integer=True, unit="containers started ahead; 0 = off"),
        "remove_in_background": s.flag("remove_in_background", True), "runtime": _text(s, "runtime", None),
        "output_limit": _output_limit(s), "env": _env(s), "base_url": _text(s, "base_url", None)}


READERS: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {"local": host, "bwrap": bwrap, "docker": docker}


def check(sandbox: Mapping[str, Any] | None) -> None:
    """Read the section as its backend will (nothing for a _target_ of the user's own)."""
    kind = TARGETS.get(str((sandbox or {}).get("_target_")))
    if kind:
        READERS[kind](sandbox or {})


def _output_limit(s: Section) -> int:
    return s.number("output_limit", 20000, integer=True, positive=True, unit="characters of command output kept")


def _text(s: Section, key: str, default: str | None, required: bool = False) -> str | None:
    value = s.raw.get(key)
    if key not in s.raw or (value is None and not required):
        return default
    if isinstance(value, str) and value.strip():
        return value
    raise ConfigError(f"{s.path(key)}={value!r} must be a non-empty string",
                      f"set {s.path(key)}=<text>" + ("" if required else ", or null for the default"))


def _env(s: Section) -> dict[str, str]:
    """Extra environment variables for tool commands: names to strings (other values as their text)."""
    value = s.raw.get("env") or {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{s.path('env')}={value!r} must be a mapping of variable names to values",
                          f"set {s.path('env')}={{NAME: value}}, e.g. '+sandbox.env.LANG=C.UTF-8'")
    for name, item in value.items():
        if not isinstance(name, str) or not name or "=" in name or isinstance(item, (Mapping, list, tuple)):
            raise ConfigError(f"{s.path('env')}.{name}={item!r}: a variable needs a name without '=' and a "
                              "plain value", f"set {s.path('env')}.<NAME>=<text>")
    return {name: str(item) for name, item in value.items()}
