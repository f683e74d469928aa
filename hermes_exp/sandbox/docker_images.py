"""Which images a docker factory can start: each distinct image is looked up once (pulled within
`pull_timeout` if missing) and the answer, good or bad, is kept for the run."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from hermes_exp.errors import SandboxError
from hermes_exp.sandbox.docker_engine import ENGINE_HINT, _docker, _engine_errors


class ImageCache:
    def __init__(self, api: Callable[[], Any], pull_timeout: float) -> None:
        self._api, self._pull_timeout = api, float(pull_timeout)
        self._lock = threading.Lock()
        self._images: dict[str, SandboxError | None] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._users: dict[str, str | None] = {}  # image -> its Config.User (None: unknown)

    def ensure(self, image: str) -> None:
        """Present locally, else pulled within pull_timeout; the answer is cached either way."""
        with self._lock:
            lock = self._locks.setdefault(image, threading.Lock())
        with lock:
            if image not in self._images:
                self._images[image] = self._find_or_pull(image)
        if self._images[image] is not None:
            raise self._images[image]

    def user(self, image: str) -> str | None:
        """The user the image's processes run as ("" = root); None if the engine cannot say."""
        if image not in self._users:
            try:
                self._users[image] = str((self._api().inspect_image(image).get("Config") or {}).get("User") or "")
            except _engine_errors():
                self._users[image] = None
        return self._users[image]

    def _find_or_pull(self, image: str) -> SandboxError | None:
        api, docker = self._api(), _docker()
        try:
            found = api.inspect_image(image)
            self._users[image] = str((found.get("Config") or {}).get("User") or "")
            return None
        except docker.errors.ImageNotFound:
            pass
        except _engine_errors() as exc:
            return SandboxError(f"cannot inspect docker image {image!r}: {exc}", ENGINE_HINT)
        outcome: list[BaseException | None] = []
        repo, tag = docker.utils.parse_repository_tag(image)
        puller = threading.Thread(target=lambda: outcome.append(_pull(api, repo, tag or "latest")), daemon=True)
        puller.start()
        puller.join(self._pull_timeout)
        if not outcome or outcome[0] is not None:
            why = outcome[0] if outcome else f"no answer within pull_timeout={self._pull_timeout:g}s"
            return SandboxError(f"docker image {image!r} is not available locally and could not be pulled: {why}",
                                "build or load it (`docker build`/`docker load`), fix the row's `image`, "
                                "or set sandbox.image")
        return None


def _pull(api: Any, repo: str, tag: str) -> BaseException | None:
    try:
        api.pull(repo, tag=tag)
        api.inspect_image(f"{repo}:{tag}")  # some pull failures arrive inside a 200 response
        return None
    except Exception as exc:  # reported to the task that needs the image
        return exc
