"""Optional packages (the extras): imported when a run first needs one, else the error that names it.

Every extra is imported lazily, so a plain install runs everything that does not need it; the error a
missing one raises says which package, and how to install it (the extra), in the caller's own error type
(a config key, a dataset reader, a sandbox)."""

from __future__ import annotations

import importlib
from types import ModuleType

from hermes_exp.errors import HermesExpError


def require(module: str, missing: HermesExpError) -> ModuleType:
    """`module` (dotted: its parent packages are imported too), or `missing` raised from the ImportError."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise missing from exc
