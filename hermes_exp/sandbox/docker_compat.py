"""Engines behind the Docker API that are not Docker's dockerd, and runtimes that are not runc: what
each needs, learned from the engine once before any container. Podman's service (`podman system
service`) ends an exec's output stream when its command exits, even while background children hold
it open, so commands there run in a session of their own that is killed when they end; rootless
Podman on cgroup v1 ignores every resource limit (a warning says so); gVisor's runsc under dockerd
needs `--network=none` among its runtimeArgs for containers without a network, and the engine's
pids limit counts gVisor's own threads (about 20 at rest, 50 with 20 commands), ending the whole
sandbox when reached, so under runsc it is not set (the memory limit still bounds the sandbox)."""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass, replace
from typing import Any

from hermes_exp.errors import ConfigError, SandboxError

log = logging.getLogger(__name__)

GVISOR_FIX = ('register it with runsc\'s own flag in the engine\'s daemon.json: "runtimes": {"runsc": {"path": '
              '"/usr/bin/runsc", "runtimeArgs": ["--network=none"]}} (then restart dockerd), or run under Podman '
              "(sandbox.base_url=unix:///path/podman.sock), or set sandbox.network=true")


@dataclass(frozen=True)
class EngineFacts:
    podman: bool = False
    rootless: bool = False
    cgroup_v1: bool = False
    gvisor: bool = False  # sandbox.runtime is gVisor's runsc


_KNOWN: dict[str, EngineFacts] = {}  # per engine address, for this process (Podman's info takes a second)


def engine_facts(api: Any, where: str) -> EngineFacts:
    """Which engine answers at `where`: Podman names its own API version in every ping's headers."""
    if where in _KNOWN:
        return _KNOWN[where]
    libpod = api.get(f"{api.base_url}/_ping", timeout=30).headers.get("Libpod-Api-Version")
    if not libpod:
        return _KNOWN.setdefault(where, EngineFacts())
    host = _libpod_info(api, libpod).get("host") or {}
    security = host.get("security") or {}
    return _KNOWN.setdefault(where, EngineFacts(podman=True, rootless=bool(security.get("rootless")),
                                                cgroup_v1=str(host.get("cgroupVersion")) == "v1"))


def _libpod_info(api: Any, version: str) -> dict[str, Any]:
    """Podman's own /libpod/info (its Docker-compatible /info reports limits it then ignores)."""
    response = api.get(f"{api.base_url}/v{version}/libpod/info", timeout=30)
    if response.status_code != 200:
        log.warning("the Podman engine did not answer /libpod/info (HTTP %s)", response.status_code)
        return {}
    return response.json()


def check_engine(api: Any, facts: EngineFacts, runtime: str | None, network: bool) -> bool:
    """Refuse a runtime that would fail every container; warn about limits the engine will not enforce.
    True if the runtime is gVisor's."""
    if facts.rootless and facts.cgroup_v1:
        log.warning("the container engine is rootless Podman on cgroup v1: it ignores sandbox.memory_mb, "
                    "sandbox.cpus and sandbox.pids_limit (\"Resource limits are not supported and ignored on "
                    "cgroups V1 rootless systems\"); run it rootful, or rootless on a cgroup v2 host, to enforce them")
    entry = (api.info().get("Runtimes") or {}).get(runtime) or {} if runtime else {}
    if posixpath.basename(str(entry.get("path") or "")) != "runsc":
        return False
    if not facts.podman:  # Podman gives runsc a network namespace of its own: no flag needed there
        _gvisor_network([str(a) for a in entry.get("runtimeArgs") or []], runtime, network)
    log.info("sandbox.runtime=%s is gVisor: sandbox.pids_limit is not set (the engine's pids limit would count "
             "gVisor's own threads and end the whole sandbox); sandbox.memory_mb bounds it", runtime)
    return True


def _gvisor_network(args: list[str], runtime: str | None, network: bool) -> None:
    """Under dockerd: refuse runsc without --network=none for containers without a network."""
    no_network = "--network=none" in args or any(a == "--network" and b == "none" for a, b in zip(args, args[1:]))
    if no_network and network:
        log.warning("sandbox.runtime=%s runs with --network=none: containers have no network although "
                    "sandbox.network=true", runtime)
    if not no_network and not network:
        raise ConfigError(f"sandbox.runtime={runtime!r} is gVisor's runsc without --network=none in the engine's "
                          "runtimeArgs: under dockerd every container without a network fails to start (\"cannot "
                          "run with network enabled in root network namespace\")", GVISOR_FIX)


def probe(api: Any, where: str, runtime: str | None, network: bool,
          errors: tuple[type[BaseException], ...]) -> EngineFacts:
    """engine_facts and check_engine, an engine error as a SandboxError."""
    try:
        facts = engine_facts(api, where)
        gvisor = check_engine(api, facts, runtime, network)
    except errors as exc:
        raise SandboxError(f"cannot ask the container engine what it is: {exc}") from exc
    return replace(facts, gvisor=gvisor)
