"""A Harbor `task.toml` read into what hermes-exp applies, and the keys it does not.

The schema is Harbor's TaskConfig (harbor-framework/harbor, src/harbor/models/task/config.py, schema
1.4): [verifier] timeout_sec (default 600), env and user; [agent] timeout_sec (default none) and user (both
default to the image's user); [environment]
build_timeout_sec (default 600), docker_image, cpus, memory_mb (and the deprecated `memory = "2G"`),
workdir, network_mode ("no-network" | "public" | "allowlist", default public) and the deprecated
allow_internet; [solution] env. Harbor keys that hermes-exp does not apply, and keys Harbor does not
know, are listed (`Parsed.ignored`, `Parsed.unknown`) so the reader can warn once about each."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_exp.settings.sections import Section

# Every key of Harbor's schema, per table ("" = the top level).
HARBOR_KEYS: dict[str, set[str]] = {
    "": {"schema_version", "version", "task", "metadata", "verifier", "agent", "environment", "solution",
         "source", "steps", "artifacts", "multi_step_reward_strategy"},
    "verifier": {"timeout_sec", "env", "user", "environment_mode", "environment", "collect", "network_mode",
                 "allowed_hosts"},
    "agent": {"timeout_sec", "user", "network_mode", "allowed_hosts"},
    "environment": {"build_timeout_sec", "docker_image", "os", "cpus", "memory_mb", "storage_mb", "gpus",
                    "gpu_types", "tpu", "mcp_servers", "env", "skills_dir", "healthcheck", "workdir",
                    "allow_internet", "network_mode", "allowed_hosts", "memory", "storage"},
    "solution": {"env"},
}
# What hermes-exp applies; the rest of HARBOR_KEYS is reported as not applied (metadata is free-form).
APPLIED = {"": {"schema_version", "version", "task", "metadata", "verifier", "agent", "environment",
                "solution", "source"},
           "verifier": {"timeout_sec", "env", "user"}, "agent": {"timeout_sec", "user"},
           "environment": {"build_timeout_sec", "docker_image", "cpus", "memory_mb", "memory", "workdir",
                           "allow_internet", "network_mode", "os"},
           "solution": {"env"}}
# Keys whose meaning cannot be kept: the task is reported as invalid rather than run differently.
REFUSED = {("", "steps"): "multi-step tasks ([[steps]]) are not supported",
           ("verifier", "environment"): "a separate verifier container ([verifier.environment]) is not supported",
           ("verifier", "environment_mode"): "a separate verifier container (environment_mode) is not supported"}


class TaskTomlError(ValueError):
    """task.toml cannot be read, or holds a value hermes-exp cannot honour."""


@dataclass
class Parsed:
    verifier_timeout: float = 600.0
    agent_timeout: float | None = None
    build_timeout: float = 600.0
    docker_image: str | None = None
    cpus: float | None = None
    memory_mb: int | None = None
    workdir: str | None = None
    network: bool | None = None  # None: Harbor's default (public)
    verifier_env: dict[str, str] = field(default_factory=dict)
    solution_env: dict[str, str] = field(default_factory=dict)
    agent_user: str | None = None  # None: the image's user
    verifier_user: str | None = None
    ignored: list[str] = field(default_factory=list)  # Harbor keys not applied, as "[table].key"
    unknown: list[str] = field(default_factory=list)  # keys Harbor does not know either


def read_task_toml(path: Path) -> Parsed:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise TaskTomlError(f"cannot read it: {exc}") from exc
    parsed = Parsed()
    _sort_keys(data, parsed)
    verifier, agent, env = (_table(data, name) for name in ("verifier", "agent", "environment"))
    parsed.verifier_timeout = _number(verifier, "verifier", "timeout_sec", 600.0)
    parsed.agent_timeout = _number(agent, "agent", "timeout_sec", None)
    parsed.build_timeout = _number(env, "environment", "build_timeout_sec", 600.0)
    parsed.cpus = _number(env, "environment", "cpus", None)
    parsed.memory_mb = _memory(env)
    parsed.docker_image = _text(env, "environment", "docker_image")
    parsed.workdir = _text(env, "environment", "workdir")
    parsed.network = _network(env)
    parsed.verifier_env = _env(verifier, "verifier")
    parsed.agent_user, parsed.verifier_user = _user(agent, "agent"), _user(verifier, "verifier")
    parsed.solution_env = _env(_table(data, "solution"), "solution")
    if str(env.get("os", "linux")).lower() != "linux":
        raise TaskTomlError(f"[environment].os={env['os']!r}: only linux containers are supported")
    return parsed


def _sort_keys(data: dict[str, Any], parsed: Parsed) -> None:
    for table, known in HARBOR_KEYS.items():
        section = data if table == "" else data.get(table)
        if not isinstance(section, dict):
            continue
        for key in section:
            name = f"[{table}].{key}" if table else key
            if (table, key) in REFUSED:
                raise TaskTomlError(f"{name}: {REFUSED[(table, key)]}")
            if key not in known:
                parsed.unknown.append(name)
            elif key not in APPLIED[table] and section[key] not in ({}, [], 0, None, False, ""):
                parsed.ignored.append(name)  # an empty value (`gpus = 0`, `mcp_servers = []`) asks for nothing


def _table(data: dict[str, Any], name: str) -> dict[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise TaskTomlError(f"[{name}] must be a table, got {type(value).__name__}")
    return value


def _number(table: dict[str, Any], name: str, key: str, default: float | None) -> Any:
    return Section(f"[{name}]", table, error=_toml_error).number(key, default, positive=True)


def _toml_error(message: str, _fix: str) -> TaskTomlError:
    return TaskTomlError(message)  # task.toml errors name the file and table; the caller says what to do


def _text(table: dict[str, Any], name: str, key: str) -> str | None:
    value = table.get(key)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise TaskTomlError(f"[{name}].{key}={value!r} must be a non-empty string")
    return value


def _user(table: dict[str, Any], name: str) -> str | None:
    """A user name or uid, as `docker exec --user` takes it (Harbor also accepts an integer uid)."""
    value = table.get("user")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return str(value)
    return _text(table, name, "user")


def _memory(env: dict[str, Any]) -> int | None:
    """memory_mb, or the deprecated `memory = "2G"` (Harbor's _parse_size_to_mb: G, M, K suffixes)."""
    if env.get("memory_mb") is not None:
        return int(_number(env, "environment", "memory_mb", None))
    size = env.get("memory")
    if size is None:
        return None
    text = str(size).strip().upper()
    scale = {"G": 1024.0, "M": 1.0, "K": 1 / 1024}.get(text[-1:])
    try:
        if scale is None:
            raise ValueError(text)
        return int(float(text[:-1]) * scale)
    except ValueError:
        raise TaskTomlError(f"[environment].memory={size!r} must look like '2G' or '512M' (or use memory_mb)") from None


def _network(env: dict[str, Any]) -> bool | None:
    """network_mode wins over the deprecated allow_internet; "allowlist" is treated as public."""
    mode = env.get("network_mode")
    if mode is not None:
        if mode not in ("no-network", "public", "allowlist"):
            raise TaskTomlError(f"[environment].network_mode={mode!r}: choose no-network, public or allowlist")
        return mode != "no-network"
    allow = env.get("allow_internet")
    if allow is not None and not isinstance(allow, bool):
        raise TaskTomlError(f"[environment].allow_internet={allow!r} must be true or false")
    return allow


def _env(table: dict[str, Any], name: str) -> dict[str, str]:
    value = table.get("env") or {}
    if not isinstance(value, dict) or not all(isinstance(v, (str, int, float)) for v in value.values()):
        raise TaskTomlError(f"[{name}].env must be a table of strings")
    return {str(k): str(v) for k, v in value.items()}
