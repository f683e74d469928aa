"""The mock model's token IDs and logprobs, in vLLM's shape, when a request asks (`logprobs`, `top_logprobs`,
`return_token_ids`): the choice's `logprobs.content` and `token_ids`, the response's `prompt_token_ids`. The
tokens are the pieces of the text the turn stands for (`generated_text`), so they join back into it exactly."""

from __future__ import annotations

import json
import re
from typing import Any

from hermes_exp.mock.model import canon, digest

# A word with the blanks before it, one other character with its blanks, or trailing blanks: every
# character of a text falls in exactly one piece, so the pieces join back into the text.
_PIECE = re.compile(r"\s*\w+|\s*[^\w\s]|\s+")
VOCABULARY = 50_000


def generated_text(message: dict[str, Any]) -> str:
    """What a Hermes-format model emits for `message`: its reasoning in <think>, its content, each tool call
    in <tool_call> (a server's parsers split this text into the message's fields)."""
    text = f"<think>\n{message['reasoning']}\n</think>\n\n" if message.get("reasoning") else ""
    text += message.get("content") or ""
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        fn = call.get("function") or {}
        text += (f'\n<tool_call>\n{{"name": {json.dumps(fn.get("name"))}, "arguments": {fn.get("arguments")}}}'
                 "\n</tool_call>")
    return text


def token_id(piece: str) -> int:
    return int(digest("token", piece), 16) % VOCABULARY


def _logprob(piece: str, rank: int) -> float:
    """The sampled piece is the likeliest (temperature 0); alternatives rank below it."""
    return -round(rank + (int(digest("logprob", piece), 16) % 1000) / 1000, 6)


def _entry(piece: str, rank: int) -> dict[str, Any]:
    return {"token": piece, "logprob": _logprob(piece, rank), "bytes": list(piece.encode("utf-8"))}


def _position(piece: str, top: int) -> dict[str, Any]:
    alternatives = [piece] + [f"{piece}{'~' * i}" for i in range(1, top)]
    return {**_entry(piece, 0), "top_logprobs": [_entry(p, i) for i, p in enumerate(alternatives[:top])]}


def with_tokens(body: dict[str, Any], completion: dict[str, Any]) -> dict[str, Any]:
    """`completion` with the token data `body` asks for (unchanged when it asks for none)."""
    choice = completion["choices"][0]
    pieces = _PIECE.findall(generated_text(choice.get("message") or {}))
    if body.get("logprobs"):
        top = int(body.get("top_logprobs") or 0)
        choice["logprobs"] = {"content": [_position(p, top) for p in pieces]}
    if body.get("return_token_ids"):
        choice["token_ids"] = [token_id(p) for p in pieces]
        completion["prompt_token_ids"] = [token_id(p) for p in _PIECE.findall(canon(body.get("messages")))]
    return completion
