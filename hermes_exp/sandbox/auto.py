"""`sandbox=auto`: bubblewrap where it works on this machine, otherwise the local sandbox.
The choice is probed once per process (a ~10 ms `bwrap ... true`) and logged once."""

from __future__ import annotations

import logging
import shutil
import threading
from typing import Any

from hermes_exp.sandbox.base import Sandbox, SandboxFactory
from hermes_exp.sandbox.bwrap import BwrapSandboxFactory, probe
from hermes_exp.sandbox.local import LocalSandboxFactory

log = logging.getLogger(__name__)

_probed: dict[str | None, str | None] = {}  # bwrap path (None: not installed) -> problem or None
_probe_lock = threading.Lock()


def bwrap_works() -> tuple[bool, str]:
    """Whether the full bubblewrap recipe runs here, and why not. Cached per bwrap path, so a PATH
    change (tests, containers) is seen, but the probe itself runs once."""
    path = shutil.which("bwrap")
    with _probe_lock:
        if path not in _probed:
            _probed[path] = probe(path) if path else "bubblewrap is not installed"
            which = "bwrap" if _probed[path] is None else f"local ({_probed[path]})"
            log.info("sandbox=auto chose %s", which)
        problem = _probed[path]
    return problem is None, problem or ""


class AutoSandboxFactory:
    """Delegates to a BwrapSandboxFactory or a LocalSandboxFactory built from the same keys; the
    choice is made lazily so that construction stays cheap in every worker."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._chosen: BwrapSandboxFactory | LocalSandboxFactory | None = None
        self._lock = threading.Lock()

    @property
    def kind(self) -> str:
        """`bwrap` or `local`: what this machine gets (probes on first access)."""
        return "bwrap" if isinstance(self._factory(), BwrapSandboxFactory) else "local"

    def _factory(self) -> BwrapSandboxFactory | LocalSandboxFactory:
        with self._lock:
            if self._chosen is None:
                ok, _ = bwrap_works()
                self._chosen = BwrapSandboxFactory(**self._kwargs) if ok else LocalSandboxFactory(**self._kwargs)
            return self._chosen

    def preflight(self, rows_images: set[str] | None = None, default_image: bool = True) -> None:
        self._factory().preflight(rows_images, default_image)

    def open(self, task_key: str, row: dict[str, Any]) -> Sandbox:
        return self._factory().open(task_key, row)

    def shutdown(self) -> None:
        if self._chosen is not None:
            self._chosen.shutdown()


def runs_on_host(factory: SandboxFactory) -> bool:
    """Whether this run's tool commands are plain host processes (sandbox=local, or auto's fallback)."""
    return isinstance(factory, LocalSandboxFactory) or (isinstance(factory, AutoSandboxFactory)
                                                        and factory.kind == "local")
