"""`sandbox=docker`: one long-lived container per prompt, commands run through `docker exec`.
Only the docker_* modules import `docker` (lazily, with an install hint): the engine and labels
(docker_engine), a container's creation (docker_lifecycle), images (docker_images), the sandbox
(docker_sandbox: exec in docker_exec, files in docker_files)."""

from __future__ import annotations

import logging
import os
import posixpath
import threading
from dataclasses import replace
import time
from typing import Any

from hermes_exp.errors import ConfigError, SandboxError
from hermes_exp.sandbox.docker_compat import EngineFacts, probe
from hermes_exp.sandbox.docker_engine import (OWNER_LABEL, RUN_LABEL, TASK_LABEL, _engine_errors, check_runtime,
                                              connect, quietly_kill, quietly_remove, reap)
from hermes_exp.sandbox.docker_images import ImageCache
from hermes_exp.sandbox.docker_lifecycle import Limits, host_config, networked, start_container, without_network_stack
from hermes_exp.sandbox.docker_pool import POOL_KEY, WarmPool
from hermes_exp.sandbox.docker_remover import Remover
from hermes_exp.sandbox.docker_sandbox import DockerSandbox
from hermes_exp.sandbox.images import ImageBuilder
from hermes_exp.sandbox.process import clean_env
from hermes_exp.sandbox import options
from hermes_exp.sandbox.reaper import mark_stopped, stopped_since
from hermes_exp.sandbox.startrate import StartRate

__all__ = ["DockerSandbox", "DockerSandboxFactory", "OWNER_LABEL", "RUN_LABEL", "TASK_LABEL"]

log = logging.getLogger(__name__)


class DockerSandboxFactory:
    """Opens one container per task. Construction touches nothing: the engine is contacted on first
    use (or in preflight), each distinct image is checked once, and live containers are capped."""

    def __init__(self, run_id: str = "run", base_dir: str = ".", **settings: Any) -> None:
        """`settings`: sandbox.* (see conf/sandbox/docker.yaml), read by sandbox.options; `base_dir`:
        where a row's container.build context is found."""
        o = options.docker(settings)
        self.image, self.run_id = o["image"], str(run_id)
        self._born = time.time()  # a shutdown mark older than this is an earlier invocation's
        self._limits = Limits(o["network"], o["read_only"], o["memory_mb"], float(o["cpus"]), o["pids_limit"],
                              o["runtime"])
        self._output_limit = o["output_limit"]
        self._env = o["env"]
        self._base_url = o["base_url"]
        self._max = o["max_sandboxes"]
        self._slots = threading.BoundedSemaphore(self._max) if self._max > 0 else None
        self._start_rate = StartRate(o["max_starts_per_second"])
        self._lock = threading.Lock()
        self._client: Any = None
        self._facts = EngineFacts()  # what the engine is (docker_compat), learned with the client
        self._images = ImageCache(self._api, o["pull_timeout"])
        self._builder = ImageBuilder(self._api, _engine_errors, base_dir, o["max_builds"],  # a row's container.build
                                     rebuild_before=self._born if o["rebuild"] else None)
        self.pool = WarmPool(o["warm_pool"], self._make_pooled, lambda cid: quietly_remove(self._api(), cid),
                             pace=self._start_rate.wait)
        self._remover = Remover(lambda cid: quietly_remove(self._api(), cid), backlog=self._max or 64) \
            if o["remove_in_background"] else None

    def preflight(self, rows_images: set[str] | None = None, default_image: bool = True) -> None:
        """Fail once if the engine is unreachable; reap this run's leftovers; warm the images. A row's
        missing image is only logged here (the tasks naming it fail one by one, at once: the answer is
        cached); sandbox.image, unless no row runs in it (`default_image=False`), fails the run: every
        task without an image of its own would fail on it."""
        self._api()
        if default_image:
            try:
                self._images.ensure(self.image)
            except SandboxError as exc:
                raise SandboxError(f"sandbox.image: {exc.message}", "build or load it (`docker build`, `docker load`; "
                                   "`docker images` lists what the engine has), or set sandbox.image=<another>") from exc
        for image in sorted(set(rows_images or ()) - {self.image}):
            try:
                self._images.ensure(image)
            except SandboxError as exc:
                log.warning("%s", exc)

    def _api(self) -> Any:
        with self._lock:
            if self._client is None:
                client = connect(self._base_url, pool_size=2 * max(self._max, 8) + 4 + self.pool.size)
                try:
                    check_runtime(client.api, self._limits.runtime)  # a bad sandbox.runtime: before any container
                    self._facts = probe(client.api, self._base_url or os.environ.get("DOCKER_HOST", ""),
                                        self._limits.runtime, self._limits.network, _engine_errors())
                    if self._facts.gvisor:
                        self._limits = replace(self._limits, pids_limit=0)  # see docker_compat
                except BaseException:
                    client.close()
                    raise
                self._client = client
                reap(self._client.api, self.run_id, everything=False)
            return self._client.api

    def _placement(self, row: dict[str, Any]) -> tuple[str, str]:
        """(image, working directory) of a row: a task row's (`container`: its image or build, in
        the image's WORKDIR), else its `image`, else sandbox.image (in /task); a row's `cwd` wins."""
        if row.get("container") is not None:
            image, workdir = self._builder.task_image(row, self._images.ensure)
        else:
            image, workdir = str(row.get("image") or row.get("docker_image") or self.image), "/task"
            self._images.ensure(image)
        return image, posixpath.normpath(posixpath.join("/", str(row.get("cwd") or workdir)))

    def open(self, task_key: str, row: dict[str, Any]) -> DockerSandbox:
        image, workdir = self._placement(row)
        pooled = self.pool.size > 0 and row.get("container") is None and (image, workdir) == (self.image, "/task")
        if pooled:
            self.pool.start()  # on the first task, not in preflight: the runner's own process may run none
        if self._slots:
            self._slots.acquire()
        try:
            cid = self.pool.take() if pooled else None
            if cid is None:
                self._start_rate.wait()
                cid = self._start(image, workdir, task_key, row.get("container") or {})
        except BaseException:
            if self._slots:
                self._slots.release()
            raise
        env = clean_env(workdir, self._env)
        for name in ("PATH", "HOME") if row.get("container") is not None else ("PATH",):
            if name not in self._env:
                env.pop(name)  # keep the image's own PATH (conda, venvs, ...); a task image's HOME
        return DockerSandbox(self._api(), cid, workdir=workdir, env=env,
                             output_limit=self._output_limit, own_session=self._facts.podman,
                             on_close=self._closer(networked(self._limits, row.get("container") or {})),
                             user=(row.get("container") or {}).get("user"))

    def _closer(self, on_network: bool) -> Any:
        """The sandbox's on_close, once: its container removed (queued for the remover, which waits
        only while the engine is a backlog behind) and `then` run after; then its slot given back.
        A container on a network is killed first, so no server of the task answers while it waits."""
        closed = threading.Event()

        def close(cid: str, then: Any) -> None:
            if closed.is_set():
                return
            closed.set()
            try:
                if self._remover is not None:
                    if on_network:
                        quietly_kill(self._api(), cid)
                    self._remover.submit(cid, then)
                else:
                    try:
                        quietly_remove(self._api(), cid)
                    finally:
                        then()
            finally:
                if self._slots:
                    self._slots.release()

        return close

    def _start(self, image: str, workdir: str, task_key: str, task: dict[str, Any]) -> str:
        api = self._api()
        config = host_config(api, self._limits, workdir, task)
        quick = without_network_stack(self._limits, task, self._images.user(image))
        cid = start_container(api, image, workdir, config, run_id=self.run_id, task_key=task_key,
                              no_network_stack=quick)
        if stopped_since(self.run_id, self._born):  # an executor worker's start the runner's reap missed
            quietly_remove(api, cid)
            raise SandboxError(f"run {self.run_id} is shutting down: no container for task {task_key}")
        return cid

    def _make_pooled(self) -> str:
        """A warm-pool container: what `open` starts for a row of the default image and workdir."""
        try:
            return self._start(self.image, "/task", POOL_KEY, {})
        except SandboxError:
            if stopped_since(self.run_id, self._born):
                self.pool.stop()
            raise

    def shutdown(self) -> None:
        """Remove every container of this run that is still there: the closed ones still queued for
        removal (waited for), the warm pool's, any other; executor workers of the run are told to start
        no more (reaper.mark_stopped). Safe to call twice."""
        mark_stopped(self.run_id)
        self.pool.stop()
        if self._remover is not None:
            self._remover.drain()
        try:
            reap(self._api(), self.run_id, everything=True)
        except (SandboxError, ConfigError) as exc:
            # An engine that never answered (or lacks sandbox.runtime) holds nothing of ours: no process of
            # the run could make a container; the start-up error said it all.
            if self._client is not None:
                log.warning("docker sandbox shutdown: %s", exc)

