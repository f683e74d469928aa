"""Compression of trajectories to a token budget (`action=compress`, `outputs.compress=true`). `compress`
and `describe` (the summariser, token counts, the ledger's store) are imported when first used: every
run checks `wanted` / `check`, few compress."""

from typing import Any

from hermes_exp.compress.gate import check, wanted

__all__ = ["check", "compress", "describe", "wanted"]


def __getattr__(name: str) -> Any:
    if name in ("compress", "describe"):
        from hermes_exp.compress import run

        return getattr(run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
