"""Compression of trajectories to a token budget (`action=compress`, `outputs.compress=true`). `compress` and
`describe` (the summariser, token counts, the ledger's store) are imported when first used: every run checks
`wanted` / `check`, few compress.

- config: The `compress.*` settings, validated, and the digest that names one compression result
- gate: Whether a run compresses, and its compression settings checked before any work: all that a run which
  does not compress needs of this package (the rest is imported when one does)
- plan: Which turns of a ShareGPT row to summarise (pure): the head (first system, human, gpt and tool turns)
  and the last `keep_last_turns` turns are protected; from the middle, just enough turns to fit the target
- run: Compression of a run's kept rows to a token budget (`action=compress`, or `outputs.compress=true` at
  export): results come from the ledger when it has them, else are computed (summaries through the model
  client) and stored; then `trajectories.compressed.jsonl` and `compression_metrics.json`
- store: Compression results in the ledger (`compressions`, keyed by the digest of row + settings)
- summarise: The summary of a region of turns, from the summariser model (`compress.model`) through the same
  model client as the agent (retries, rate limit, budget, pricing)
- tokens: Token counts for compression: a Hugging Face `tokenizers` tokenizer.json, or a tiktoken encoding
  that is already available on this machine (`compress.tokenizer`)
"""
from typing import Any

from hermes_exp.compress.gate import check, wanted

__all__ = ["check", "compress", "describe", "wanted"]


def __getattr__(name: str) -> Any:
    if name in ("compress", "describe"):
        from hermes_exp.compress import run

        return getattr(run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
