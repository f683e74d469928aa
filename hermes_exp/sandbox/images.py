"""Images built from a build context (a Harbor task's `environment/` with its Dockerfile) through the
Docker SDK. The tag is a hash of the context's content and of the base images its `FROM` lines resolve
to in the engine (their image IDs), so each distinct context is built once per engine and reused across
runs and tasks until it or a base image changes (`sandbox.rebuild=true` builds each again, without the
build cache, once per invocation); a failed build is a SandboxError naming the task and ending
with the build log's last lines, remembered for the rest of the run so the task's other samples fail
at once (the next invocation builds again: class `sandbox` is retried).

A build spec (a row's `container.build`, written by hermes_exp.dataset.readers.harbor):
  context: str        the folder, relative to the dataset's folder (or absolute)
  digest: str         content_digest(context) when the dataset was read (part of the task's key)
  dockerfile: str     within the context (default "Dockerfile")
  timeout_sec: float  Harbor's [environment].build_timeout_sec (default 600)
  task: str           who needs it, for messages
"""

from __future__ import annotations

import collections
import hashlib
import logging
import os
import re
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from hermes_exp.errors import SandboxError
from hermes_exp.sandbox.dockerfile import base_images

log = logging.getLogger(__name__)
TAG_REPO = "hermes-exp/build"
CONTEXT_LABEL = "hermes-exp.context"
BASES_LABEL = "hermes-exp.bases"  # the base images (name@ID) the image was built on
LOG_TAIL_LINES = 20
BUILD_HINT = "fix the task's environment/Dockerfile (the same command again rebuilds it), or skip the task"


def content_digest(folder: Path, cache: dict[Path, tuple[Any, str]] | None = None) -> str:
    """A hash of a folder's content: every entry's relative path, its executable bit and its bytes
    (a symlink: its target), in sorted order. Timestamps and ownership do not count. With a `cache`,
    a folder whose files all keep their size and mtime is not read again."""
    paths = sorted(p for p in folder.rglob("*") if p.is_file() or p.is_symlink())
    if cache is not None:
        stats = [(p, p.lstat()) for p in paths]
        signature = tuple((str(p), s.st_size, s.st_mtime_ns, s.st_mode) for p, s in stats)
        if folder in cache and cache[folder][0] == signature:
            return cache[folder][1]
        cache[folder] = (signature, content_digest(folder))
        return cache[folder][1]
    h = hashlib.blake2b(digest_size=16)
    for path in paths:
        rel = path.relative_to(folder).as_posix()
        if path.is_symlink():
            h.update(f"L\x00{rel}\x00{os.readlink(path)}\x00".encode())
            continue
        h.update(f"F\x00{rel}\x00{int(os.access(path, os.X_OK))}\x00{path.stat().st_size}\x00".encode())
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def image_tag(digest: str, bases: list[str] | tuple[str, ...] = ()) -> str:
    """The tag of a context's image built on these resolved bases (name@ID each)."""
    key = hashlib.blake2b("\x00".join([digest, *bases]).encode(), digest_size=12).hexdigest()
    return f"{TAG_REPO}:{key}"


class ImageBuilder:
    """Per sandbox factory (per process and run): builds each tag at most once, one build per tag at
    a time (concurrent tasks of one context wait for the same build)."""

    def __init__(self, api: Callable[[], Any], errors: Callable[[], tuple[type[BaseException], ...]],
                 base_dir: str = ".", max_builds: int = 2, rebuild_before: float | None = None) -> None:
        """`rebuild_before`: with sandbox.rebuild=true, the time this process started (an image of the
        same tag built before it is built again)."""
        self._api, self._errors, self._base = api, errors, Path(base_dir)
        self._rebuild_before = rebuild_before
        self._slots = threading.BoundedSemaphore(max(1, int(max_builds)))  # builds are CPU and disk heavy
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._known: dict[str, tuple[str, SandboxError | None]] = {}  # tag -> (image workdir, failure)
        self._workdirs: dict[str, str] = {}  # prebuilt image -> its WORKDIR
        self._fallbacks: set[str] = set()
        self._bases_of: dict[Path, list[str]] = {}  # Dockerfile -> its base images, resolved  # prebuilt images given up for a build (said once each)

    def task_image(self, row: dict[str, Any], ensure_image: Callable[[str], None]) -> tuple[str, str]:
        """(image, its WORKDIR) of a task row (`container`): its prebuilt image (the row's `image`, or
        `container.image` beside a build) when the engine has it or can pull it (Harbor prefers a task's
        docker_image), else built from `container.build`."""
        container = row.get("container") or {}
        image, build = row.get("image") or container.get("image"), container.get("build")
        if image:
            try:
                ensure_image(str(image))
                return str(image), self._workdir_of(str(image))
            except SandboxError as exc:
                if not build:
                    raise
                with self._lock:
                    first = str(image) not in self._fallbacks
                    self._fallbacks.add(str(image))
                if first:
                    log.warning("%s; building it from %s instead", exc.message, build.get("context"))
        if not build:
            raise SandboxError(f"task {row.get('id')}: no image to run it in", "give it an environment/Dockerfile")
        return self.ensure(build)

    def _workdir_of(self, image: str) -> str:
        with self._lock:
            if image in self._workdirs:
                return self._workdirs[image]
        try:
            workdir = _workdir(self._api().inspect_image(image))
        except self._errors() as exc:
            raise SandboxError(f"cannot inspect docker image {image!r}: {exc}") from exc
        with self._lock:
            self._workdirs[image] = workdir
        return workdir

    def ensure(self, spec: dict[str, Any]) -> tuple[str, str]:
        """(tag, the image's working directory) of the spec's image, built if the engine lacks it."""
        task = str(spec.get("task") or spec.get("context"))
        context = self._context(spec, task)
        bases = self._bases(context / str(spec.get("dockerfile") or "Dockerfile"))
        tag = image_tag(str(spec.get("digest") or ""), bases)
        with self._lock:
            lock = self._locks.setdefault(tag, threading.Lock())
        with lock:
            if tag not in self._known:
                self._known[tag] = self._find_or_build(spec, context, tag, task, bases)
                if self._known[tag][1] is not None:  # once per context: the tasks' errors repeat it
                    log.warning("%s", self._known[tag][1])
        workdir, failure = self._known[tag]
        if failure is not None:
            raise failure
        return tag, workdir

    def _bases(self, dockerfile: Path) -> list[str]:
        """name@ID of each base image as the engine has it now (name@absent when it has none: the
        build pulls it, and the image built then gets the tag of its ID from the next run on)."""
        with self._lock:
            if dockerfile in self._bases_of:  # resolved once per process and run: a task's start stays quick
                return self._bases_of[dockerfile]
        resolved = []
        for name in base_images(dockerfile):
            try:
                resolved.append(f"{name}@{self._api().inspect_image(name)['Id']}")
            except self._errors():
                resolved.append(f"{name}@absent")
        with self._lock:
            self._bases_of[dockerfile] = resolved
        return resolved

    def _context(self, spec: dict[str, Any], task: str) -> Path:
        context = Path(str(spec.get("context") or ""))
        context = context if context.is_absolute() else self._base / context
        if not context.is_dir():
            raise SandboxError(f"task {task}: the build context {context} is not a folder",
                               "check that the task folder still has its environment/ folder")
        if content_digest(context) != spec.get("digest"):
            raise SandboxError(f"task {task}: {context} changed since the dataset was read",
                               "run again: the task's new content is a new task")
        return context

    def _find_or_build(self, spec: dict[str, Any], context: Path, tag: str, task: str,
                       bases: list[str]) -> tuple[str, SandboxError | None]:
        api = self._api()
        try:
            found = api.inspect_image(tag)
            if not self._stale(found):
                return _workdir(found), None
            log.info("sandbox.rebuild: building %s for task %s again", tag, task)
        except self._errors() as exc:
            if getattr(getattr(exc, "response", None), "status_code", None) != 404:
                return "/", SandboxError(f"task {task}: cannot inspect image {tag}: {exc}")
        with self._slots:
            failure = self._build(api, {**spec, "bases": bases}, context, tag, task)
        if failure is not None:
            return "/", failure
        try:
            return _workdir(api.inspect_image(tag)), None
        except self._errors() as exc:
            return "/", SandboxError(f"task {task}: the image {tag} was built but cannot be inspected: {exc}")

    def _stale(self, found: dict[str, Any]) -> bool:
        """With sandbox.rebuild=true: whether the image was built before this process started."""
        if self._rebuild_before is None:
            return False
        created = re.sub(r"(\.\d{6})\d*", r"\1", str(found.get("Created") or "")).replace("Z", "+00:00")
        try:
            return datetime.fromisoformat(created).timestamp() < self._rebuild_before
        except ValueError:
            return True

    def _build(self, api: Any, spec: dict[str, Any], context: Path, tag: str, task: str) -> SandboxError | None:
        """Stream the build; None when it succeeded, else the error with the log's tail."""
        timeout = float(spec.get("timeout_sec") or 600)
        tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL_LINES)
        deadline = time.monotonic() + timeout
        error = None
        try:
            stream = api.build(path=str(context), dockerfile=str(spec.get("dockerfile") or "Dockerfile"), tag=tag,
                               rm=True, forcerm=True, pull=False, decode=True, timeout=timeout,
                               nocache=self._rebuild_before is not None,
                               labels={CONTEXT_LABEL: str(spec.get("digest")),
                                       BASES_LABEL: " ".join(spec.get("bases") or ())})
            for chunk in stream:
                tail.extend(line for line in str(chunk.get("stream") or "").splitlines() if line.strip())
                if chunk.get("error"):
                    error = str(chunk["error"]).strip()
                if time.monotonic() > deadline:
                    error = f"the build took longer than build_timeout_sec={timeout:g}"
                    break
        except self._errors() as exc:
            error = str(getattr(exc, "explanation", None) or exc)
        if error is None:
            return None
        log = "\n".join(f"    {line}" for line in tail) or "    (no build output)"
        return SandboxError(f"task {task}: building its image from {context / str(spec.get('dockerfile') or 'Dockerfile')} "
                            f"failed: {error}\n  last lines of the build log:\n{log}", BUILD_HINT)


def _workdir(inspected: dict[str, Any]) -> str:
    return str((inspected.get("Config") or {}).get("WorkingDir") or "/")
