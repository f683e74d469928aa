"""A call's request body and its prompt-token estimate from one serialisation, per message.

A session thread sends one task's conversation with every call, each time longer by a message or two,
and the same tool list: serialising the whole body for the wire and again for the estimate made every
call O(conversation). Here each message and the tool list are serialised once per thread (the body's
compact form and the estimate's sizes together), and a call joins the pieces: byte for byte what one
json.dumps of the body gives, and the same estimate as cost.estimate_prompt_tokens (tests/test_wire_encoding.py)."""

from __future__ import annotations

import json
import threading
from typing import Any

from hermes_exp.cost import text_sizes, tokens_from_sizes

_last = threading.local()  # the pieces of this thread's last body
# Tool lists' pieces, shared by every thread: a run sends one list per toolset draw (tools.registry),
# the same object to every session, so each is serialised once per run, not once per task and thread.
_TOOL_LISTS: dict[int, "_Piece"] = {}
_MAX_TOOL_LISTS = 64  # other callers' lists: past this many, the cache starts again


def dumps(value: Any) -> str:
    """Compact JSON, as the SDK serialises a request body."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


_NO_TOOLS: list[dict[str, Any]] = []


class _Piece:
    """One value (a message, the tool list) as sent, and the sizes the estimate counts it at."""

    __slots__ = ("value", "wire", "ascii", "other")

    def __init__(self, value: Any) -> None:
        self.value = value  # held, so the identity check below cannot match a new object at its address
        self.wire = dumps(value)
        self.ascii, self.other = text_sizes(json.dumps(value, ensure_ascii=False))


def _piece(value: Any, previous: _Piece | None) -> _Piece:
    return previous if previous is not None and previous.value is value else _Piece(value)


def _tool_list(value: list[dict[str, Any]]) -> _Piece:
    piece = _TOOL_LISTS.get(id(value))
    if piece is None or piece.value is not value:  # the piece holds its list: its id is not reused meanwhile
        piece = _Piece(value)
        if len(_TOOL_LISTS) >= _MAX_TOOL_LISTS:
            _TOOL_LISTS.clear()
        _TOOL_LISTS[id(value)] = piece
    return piece


def encode(body: dict[str, Any]) -> tuple[bytes, int]:
    """(the body as compact JSON, the estimated prompt tokens of its messages and tools)."""
    before = getattr(_last, "messages", ())
    messages = body.get("messages") or []
    pieces = [_piece(m, before[i] if i < len(before) else None) for i, m in enumerate(messages)]
    tools = _tool_list(body.get("tools") or _NO_TOOLS)
    _last.messages = pieces
    members = []
    for key, value in body.items():
        if key == "messages":
            text = "[" + ",".join(p.wire for p in pieces) + "]"
        elif key == "tools":
            text = tools.wire
        else:
            text = dumps(value)
        members.append(f"{dumps(key)}:{text}")
    # the estimate's JSON of the message list has ", " between messages and the brackets around them
    ascii_chars = sum(p.ascii for p in pieces) + 2 * max(len(pieces), 1) + tools.ascii
    other_bytes = sum(p.other for p in pieces) + tools.other
    return ("{" + ",".join(members) + "}").encode(), tokens_from_sizes(ascii_chars, other_bytes)


def forget() -> None:
    """Drop this thread's pieces (its conversation, serialised): called when a conversation ends, so an
    idle session thread holds none of it while the run goes on."""
    _last.__dict__.clear()
