"""sqlite-utils without pandas and numpy. When they are installed, sqlite-utils imports both at import
time only to map their value types to column types, which the ledger never stores; that import was
most of a no-op invocation's start-up (+2.5 s of CPU and +72 MB with the dev extras, bench/RESULTS.md).
A module already imported by something else is left alone, and both stay importable afterwards."""

from __future__ import annotations

import sys
from types import ModuleType

_SKIPPED = ("pandas", "numpy")


def _import() -> ModuleType:
    if "sqlite_utils" in sys.modules:
        return sys.modules["sqlite_utils"]
    blocked = [name for name in _SKIPPED if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]  # `import name` raises ImportError
    try:
        import sqlite_utils
    finally:
        for name in blocked:
            if sys.modules.get(name, ...) is None:
                del sys.modules[name]
    return sqlite_utils


sqlite_utils = _import()
