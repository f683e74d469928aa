"""The Docker engine as `sandbox=docker` sees it: the SDK (imported lazily, with an install hint), the
errors that mean "the engine failed", one client per factory, the labels a run's containers carry and the
removal of a run's containers (its leftovers at start, all of them at shutdown)."""

from __future__ import annotations

import functools
import logging
import os
import socket
from typing import Any

from hermes_exp.errors import ConfigError, SandboxError

log = logging.getLogger(__name__)

RUN_LABEL, TASK_LABEL, OWNER_LABEL = "hermes-exp.run", "hermes-exp.task", "hermes-exp.owner"
ENGINE_HINT = ("start the engine (as root: `dockerd &`, or .ci/setup-sandboxes.sh) and export "
               "DOCKER_HOST=unix:///path/to/docker.sock if it is not on the default socket; "
               "or choose sandbox=bwrap or sandbox=local")


def _docker() -> Any:
    try:
        import docker
    except ImportError as exc:
        raise SandboxError("sandbox=docker needs the `docker` Python package",
                           "pip install 'docker>=7'") from exc
    return docker


def _engine_errors() -> tuple[type[BaseException], ...]:
    import requests

    return (_docker().errors.DockerException, requests.RequestException, OSError)


_API_VERSIONS: dict[str, str] = {}  # the API version each engine address answered with, in this process


def connect(base_url: str | None, pool_size: int) -> Any:
    """A pinged client. `pool_size` kept-alive connections: every session's exec stream holds one while
    its command runs, and the SDK's default of 10 would open and drop a connection per call beyond that.
    The API version is asked once per address and process (Podman takes over a second to answer)."""
    docker = _docker()
    where = base_url or os.environ.get("DOCKER_HOST") or "the default socket"
    size = max(int(pool_size), docker.constants.DEFAULT_MAX_POOL_SIZE)
    version = _API_VERSIONS.get(where, "auto")
    try:
        client = docker.DockerClient(base_url=base_url, max_pool_size=size, version=version) if base_url \
            else docker.from_env(max_pool_size=size, version=version)
        _one_pool(client.api, size)
        client.ping()
        _API_VERSIONS[where] = client.api.api_version
    except _engine_errors() as exc:
        raise SandboxError(f"cannot reach the Docker engine at {where}: {exc}", ENGINE_HINT) from exc
    return client


def check_runtime(api: Any, runtime: str | None) -> None:
    """Refuse a sandbox.runtime the engine does not offer, before any container is made (the engine
    would otherwise fail every task's create with "unknown or invalid runtime name")."""
    if runtime is None:
        return
    try:
        offered = sorted((api.info().get("Runtimes") or {}).keys())
    except _engine_errors() as exc:
        raise SandboxError(f"cannot ask the Docker engine for its runtimes: {exc}", ENGINE_HINT) from exc
    if runtime not in offered:
        raise ConfigError(f"sandbox.runtime={runtime!r} is not a runtime of the Docker engine (it offers: "
                          f"{', '.join(offered) or 'none'})",
                          f"register it on the engine (`dockerd --add-runtime {runtime}=/path/to/{runtime}`, or "
                          f'"runtimes" in daemon.json) or set sandbox.runtime to one of those, or null for the '
                          "engine's default")


def _one_pool(api: Any, size: int) -> None:
    """docker-py keys its unix-socket connection pools by the whole request URL: every exec id and
    container path gets a pool and a connection of its own, and past 25 of them the least recently
    used is closed, even while another thread is about to take a connection from it ("Pool is closed"
    at 32 sessions). Here every request to the socket shares one pool of `size` connections (an exec's
    hijacked stream is never given back to a pool, so no request can land in it)."""
    from docker.transport.unixconn import UnixHTTPAdapter

    old = getattr(api, "_custom_adapter", None)
    if type(old) is not UnixHTTPAdapter:
        return  # tcp:// (one pool per host already), ssh://, or an SDK that changed: left as it is
    adapter = _one_pool_adapter()("http+unix://" + old.socket_path, old.timeout, max_pool_size=size)
    api.mount("http+docker://", adapter)
    api._custom_adapter = adapter
    old.close()


@functools.cache
def _one_pool_adapter() -> type:
    from docker.transport.unixconn import UnixHTTPAdapter

    class OnePoolAdapter(UnixHTTPAdapter):
        def get_connection(self, url: str, proxies: Any = None) -> Any:
            return super().get_connection("http+docker://localhost", proxies)

    return OnePoolAdapter


def owner() -> str:
    """The OWNER_LABEL value of this process's containers."""
    return f"{socket.gethostname()}:{os.getpid()}"


def is_leftover(labels: dict[str, str]) -> bool:
    """A container of this run whose creating process is gone (a crash, a kill -9, an earlier attempt).
    Containers made by a live process (a sibling worker) or on another machine are left alone."""
    made_by = labels.get(OWNER_LABEL)
    if not made_by:
        return True
    host, _, pid = made_by.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    return False


def reap(api: Any, run_id: str, *, everything: bool) -> int:
    """Remove this run's containers (warm-pool ones included): leftovers only, or (at shutdown) all.
    Never other runs'."""
    removed = 0
    for c in api.containers(all=True, filters={"label": f"{RUN_LABEL}={run_id}"}):
        if (everything or is_leftover(c.get("Labels") or {})) and quietly_remove(api, c["Id"]):
            removed += 1
    if removed:
        log.info("removed %d container(s) of run %s", removed, run_id)
    return removed


def quietly_remove(api: Any, cid: str) -> bool:
    """Force-remove a container and its anonymous volumes; never raises (cleanup must not mask the
    error that brought us here). False if it could not be removed."""
    errors = _docker().errors
    try:
        api.remove_container(cid, force=True, v=True)
    except errors.NotFound:
        pass
    except errors.APIError as exc:
        if exc.status_code != 409 or "in progress" not in str(exc.explanation or ""):
            log.warning("could not remove container %s: %s", cid[:12], exc)
            return False
        # another remover (a worker's, or the shutdown reap) is at it: the engine finishes it
    except _engine_errors() as exc:
        log.warning("could not remove container %s: %s", cid[:12], exc)
        return False
    return True


def quietly_kill(api: Any, cid: str) -> None:
    """SIGKILL a container's processes now (its removal comes later); never raises: the removal that
    follows ends them anyway, or logs why it could not."""
    try:
        api.kill(cid)
    except _engine_errors() as exc:
        log.debug("could not kill container %s: %s", cid[:12], exc)
