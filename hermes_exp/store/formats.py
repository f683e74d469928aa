"""Extra output formats derived from the ledger: OpenAI messages JSONL and Parquet trajectories (ATIF:
store/atif.py).

ShareGPT `trajectories.jsonl` is always written (it is the Hermes-compatible output); these are
chosen with `outputs.formats`. Like every export, each file is written atomically."""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from hermes_exp.model.reasoning import native_reasoning
from hermes_exp.model.tokens import MESSAGE_KEYS
from hermes_exp.errors import ConfigError
from hermes_exp.store.atomic import atomic_writer
from hermes_exp.store.sharegpt import sent_tools, system_mode
from hermes_exp.tools.registry import Registry
from hermes_exp.optional import require

FORMATS = ("sharegpt", "openai", "parquet", "atif")  # atif: store/atif.py
OPENAI_FILE = "trajectories.openai.jsonl"
PARQUET_FILE = "trajectories.parquet"
_CHUNK = 500  # rows per Arrow record batch: memory stays flat in the size of the run


def chosen_formats(settings: dict[str, Any]) -> list[str]:
    """`outputs.formats` from the settings, checked against the known formats (and the ShareGPT
    system turn mode, so that a typo in either stops the run before any work)."""
    system_mode(settings)
    formats = list((settings.get("outputs") or {}).get("formats") or ["sharegpt"])
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ConfigError(f"outputs.formats has unknown format(s) {', '.join(map(repr, unknown))}",
                          f"choose from {', '.join(FORMATS)}, e.g. outputs.formats=[sharegpt,parquet]")
    if "parquet" in formats:
        _pyarrow()  # missing, it is said before any work, not after the other files are written
    return formats


def openai_message(message: dict[str, Any]) -> dict[str, Any]:
    """One message with a fixed set of keys (null where unused), so every line has one schema.

    `role`, `content`, `tool_calls`, `tool_call_id` and `name` are exactly as sent or received;
    the reasoning goes to `reasoning_content`, the key Hugging Face chat templates read. An assistant
    turn's token data (`logprobs`, `token_ids`, `prompt_token_ids`) follows as the server returned it,
    and is absent where the run did not ask for it or the server did not return it."""
    calls = message.get("tool_calls")
    tokens = {k: message[k] for k in MESSAGE_KEYS if k in message}
    return {
        "role": message.get("role"),
        "content": message.get("content"),
        "reasoning_content": native_reasoning(message) or None,
        "tool_calls": [{"id": c.get("id"), "type": c.get("type", "function"),
                        "function": {"name": (c.get("function") or {}).get("name"),
                                     "arguments": (c.get("function") or {}).get("arguments")}}
                       for c in calls] if calls else None,
        "tool_call_id": message.get("tool_call_id"),
        "name": message.get("name"),
        **tokens,
    }


def openai_record(row: dict[str, Any], result: dict[str, Any], model: str,
                  score: dict[str, Any] | None = None, registry: Registry | None = None) -> dict[str, Any]:
    """One kept task as a chat fine-tuning record. `tools` (the tool list sent) is a JSON string:
    its nested JSON Schemas differ between toolsets, which no single table schema could hold."""
    extra = {k: v for k, v in (result.get("row") or {}).items() if k != "prompt"}
    toolsets = list(result.get("toolsets", []))
    return {
        "messages": [openai_message(m) for m in result.get("messages", [])],
        "tools": sent_tools(row, result, registry)[0],
        "toolsets": toolsets,
        "prompt_index": row["prompt_index"],
        "metadata": {**extra, "key": row["key"], "batch_num": row["batch_num"], "model": model},
        "sample": int(row.get("sample") or 0),
        "reward": (score or {}).get("reward"),
        "passed": (score or {}).get("passed"),
    }


def _pyarrow() -> Any:
    missing = ConfigError("the parquet output format needs pyarrow, which is not installed",
                          "pip install 'hermes-exp[parquet]', or drop parquet from outputs.formats")
    require("pyarrow.parquet", missing)  # a submodule: imported so that `pyarrow.parquet` resolves
    return require("pyarrow", missing)


def _chunks(path: Path) -> Iterator[list[dict[str, Any]]]:
    with path.open(encoding="utf-8") as fh:
        while chunk := [json.loads(line) for line in islice(fh, _CHUNK)]:
            yield chunk


def write_parquet(run_dir: Path) -> Path:
    """`trajectories.parquet` from `trajectories.jsonl`, in two streaming passes: one to unify the
    schema of every chunk (a dataset's extra fields may differ per row), one to write."""
    pa = _pyarrow()
    source, path = run_dir / "trajectories.jsonl", run_dir / PARQUET_FILE
    schemas = [pa.Table.from_pylist(chunk).schema for chunk in _chunks(source)]
    schema = pa.unify_schemas(schemas, promote_options="permissive") if schemas else pa.schema([])
    with atomic_writer(path, binary=True) as sink, \
            pa.parquet.ParquetWriter(sink, schema, compression="zstd") as writer:
        for chunk in _chunks(source):
            writer.write_table(pa.Table.from_pylist(chunk, schema=schema))
    return path
