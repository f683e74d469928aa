"""Fixtures for the sandbox suites: one `backend` fixture (local, bwrap, docker) with real engines; the
contract suite adds the docker sandbox on private engines without a root daemon or under gVisor
(ENGINE_BACKENDS: podman, podman-rootless, runsc; tests/sandbox/engines.py starts them). Outside CI an unavailable engine skips its tests; with CI=true it fails them, so CI never goes green
by skipping."""

from __future__ import annotations

import functools
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hermes_exp.sandbox.auto import bwrap_works
from hermes_exp.sandbox.base import Sandbox
from tests.sandbox import engines
from tests.sandbox.engines import Engine

IMAGE = os.environ.get("HX_TEST_IMAGE", "hermes-exp-test/busybox:latest")
IMAGE2 = os.environ.get("HX_TEST_IMAGE2", "hermes-exp-test/busybox2:latest")
SETUP_HINT = "run `.ci/setup-sandboxes.sh ENVFILE` as root and `source ENVFILE`"

# The settings every backend gets in the contract suite: small enough that limits are testable.
CONTRACT_SETTINGS: dict[str, Any] = {"output_limit": 1000, "memory_mb": 128, "cpu_seconds": 30,
                                     "pids_limit": 64}
TARGETS = {
    "local": "hermes_exp.sandbox.local.LocalSandboxFactory",
    "bwrap": "hermes_exp.sandbox.bwrap.BwrapSandboxFactory",
    "docker": "hermes_exp.sandbox.docker.DockerSandboxFactory",
}
# the docker sandbox against a private engine of the test session's own
ENGINE_BACKENDS = ("podman", "podman-rootless", "runsc")
TARGETS.update({name: TARGETS["docker"] for name in ENGINE_BACKENDS})
BACKEND_SETTINGS: dict[str, dict[str, Any]] = {
    "local": {},
    "bwrap": {},
    "docker": {"image": IMAGE, "read_only": True, "pull_timeout": 10, "max_sandboxes": 4},
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "docker: needs a Docker engine")
    config.addinivalue_line("markers", "bwrap: needs bubblewrap")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Apply a test module's KNOWN_FAILURES {(backend, test name): reason} as strict xfails, so a
    known hole that gets fixed (or a new one) is noticed."""
    for item in items:
        known = getattr(getattr(item, "module", None), "KNOWN_FAILURES", None)
        callspec = getattr(item, "callspec", None)
        if known and callspec and "backend" in callspec.params:
            reason = known.get((callspec.params["backend"], getattr(item, "originalname", item.name)))
            if reason:
                item.add_marker(pytest.mark.xfail(strict=True, reason=reason))


def unavailable(reason: str) -> None:
    """Skip outside CI; fail in CI (a missing engine there is a broken CI, not a pass)."""
    if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
        pytest.fail(f"{reason} (CI=true: sandbox tests must not be skipped; {SETUP_HINT})")
    pytest.skip(f"{reason}; {SETUP_HINT}")


def need_runtime(client: Any, name: str) -> None:
    """`unavailable` unless the engine offers the OCI runtime `name` (.ci/setup-sandboxes.sh registers crun)."""
    offered = sorted(client.info().get("Runtimes") or {})
    if name not in offered:
        unavailable(f"the engine has no {name} runtime (it offers {offered}): start it with "
                    f"`dockerd --add-runtime {name}=/usr/bin/{name}` (.ci/setup-sandboxes.sh does for crun)")


@functools.cache
def docker_problem() -> str | None:
    """Why the Docker tests cannot run here (engine, SDK, test images), or None."""
    try:
        import docker
    except ImportError:
        return "the docker Python package is not installed"
    try:
        client = docker.from_env()
        client.ping()
        for image in (IMAGE, IMAGE2):
            client.images.get(image)
    except docker.errors.ImageNotFound as exc:
        return f"test image missing: {exc}"
    except Exception as exc:  # any way of not reaching the engine
        return f"no Docker engine reachable (DOCKER_HOST={os.environ.get('DOCKER_HOST')}): {exc}"
    return None


def require(backend: str) -> None:
    if backend == "bwrap":
        ok, why = bwrap_works()
        if not ok:
            unavailable(f"bubblewrap does not work here: {why}")
    elif backend == "docker" and docker_problem():
        unavailable(docker_problem() or "")


@dataclass
class Backend:
    """One sandbox backend under test: how to build its factory and to tell if a sandbox is gone."""

    name: str
    made: list[Any] = field(default_factory=list)
    engine: Engine | None = None  # a private engine (ENGINE_BACKENDS); None: DOCKER_HOST's for docker

    @property
    def kind(self) -> str:
        return "docker" if self.engine else self.name

    def settings(self, **overrides: Any) -> dict[str, Any]:
        engine = self.engine.settings() if self.engine else {}
        return {**CONTRACT_SETTINGS, **BACKEND_SETTINGS[self.kind], **engine, **overrides}

    def factory(self, **overrides: Any) -> Any:
        from hydra.utils import instantiate

        run_id = overrides.pop("run_id", f"test-{uuid.uuid4().hex[:10]}")
        made = instantiate({"_target_": TARGETS[self.name], **self.settings(**overrides)}, run_id=run_id)
        self.made.append(made)
        return made

    @staticmethod
    def ident(sb: Sandbox) -> str:
        """What outlives a sandbox if cleanup fails: its host directory or its container."""
        return getattr(sb, "container_id", None) or str(getattr(sb, "root"))

    def wait_gone(self, ident: str, timeout: float = 60) -> None:
        """Wait until a closed sandbox's directory or container is gone (docker removes it in the
        background); the bound is for a loaded machine, not a speed assertion."""
        deadline = time.monotonic() + timeout
        while self.exists(ident):
            assert time.monotonic() < deadline, f"{ident[:40]} outlived its sandbox's close() by {timeout:g}s"
            time.sleep(0.05)

    def exists(self, ident: str) -> bool:
        if self.kind != "docker":
            return Path(ident).exists()
        import docker

        client = self.engine.client() if self.engine else docker.from_env()
        try:
            client.api.inspect_container(ident)
            return True
        except docker.errors.NotFound:
            return False
        finally:
            client.close()


BACKENDS = [pytest.param("local"), pytest.param("bwrap", marks=pytest.mark.bwrap),
            pytest.param("docker", marks=pytest.mark.docker)]
ENGINE_PARAMS = [pytest.param(name, marks=[pytest.mark.docker, pytest.mark.slow]) for name in ENGINE_BACKENDS]


@pytest.fixture(scope="session")
def private_engine() -> Iterator[Callable[[str], Engine]]:
    """private_engine(name): the session's engine `name`, started on first use, stopped at the end."""
    started: dict[str, Engine | str] = {}

    def get(name: str) -> Engine:
        if name not in started:
            started[name] = engines.start(name)
        engine = started[name]
        if isinstance(engine, str):
            unavailable(f"the {name} engine cannot run here: {engine}")
        return engine  # type: ignore[return-value]

    yield get
    for engine in started.values():
        if not isinstance(engine, str):
            engine.stop()


def make_backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The `backend` fixture's body (a module may widen its params: test_contract adds ENGINE_PARAMS)."""
    if request.param in ENGINE_BACKENDS:
        b = Backend(request.param, engine=request.getfixturevalue("private_engine")(request.param))
    else:
        require(request.param)
        b = Backend(request.param)
    yield b
    for factory in b.made:
        factory.shutdown()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    yield from make_backend(request)


@pytest.fixture
def factory(backend: Backend) -> Any:
    return backend.factory()


@pytest.fixture
def open_sandbox(factory: Any) -> Iterator[Callable[..., Sandbox]]:
    """Opens sandboxes from the contract factory and closes them all after the test."""
    opened: list[Sandbox] = []

    def open_(row: dict[str, Any] | None = None) -> Sandbox:
        sb = factory.open(f"v1:{uuid.uuid4().hex}", row or {})
        opened.append(sb)
        return sb

    yield open_
    for sb in opened:
        sb.close()


@pytest.fixture
def sandbox(open_sandbox: Callable[..., Sandbox]) -> Sandbox:
    return open_sandbox()


@pytest.fixture
def make_factory() -> Iterator[Callable[..., Any]]:
    """Makes DockerSandboxFactory objects (the test image, a run id of their own), shut down after the test."""
    require("docker")
    from hermes_exp.sandbox.docker import DockerSandboxFactory

    made: list[DockerSandboxFactory] = []

    def make(**kwargs: Any) -> DockerSandboxFactory:
        kwargs = {"image": IMAGE, "pull_timeout": 10, "run_id": f"test-{uuid.uuid4().hex[:10]}", **kwargs}
        made.append(DockerSandboxFactory(**kwargs))
        return made[-1]

    yield make
    for factory in made:
        factory.shutdown()


@pytest.fixture
def docker_client() -> Any:
    """The raw engine client, for looking at containers from outside the code under test."""
    require("docker")
    import docker

    return docker.from_env()


def host_busybox() -> str:
    """busybox on the host (for local/bwrap network probes); the test images have it too."""
    path = shutil.which("busybox")
    if not path:
        unavailable("busybox is not installed (apt-get install -y busybox-static)")
    return "busybox"
