"""Whether a run compresses, and its compression settings checked before any work: all that a run which
does not compress needs of this package (the rest is imported when one does)."""

from __future__ import annotations

from typing import Any

from hermes_exp.compress.config import CompressSettings
from hermes_exp.compress.tokens import load_counter


def wanted(settings: dict[str, Any]) -> bool:
    return bool((settings.get("outputs") or {}).get("compress")) or settings.get("action") == "compress"


def check(settings: dict[str, Any]) -> None:
    """Bad compression settings or a missing tokenizer stop the run before any work."""
    if wanted(settings):
        load_counter(CompressSettings.from_settings(settings).tokenizer)
