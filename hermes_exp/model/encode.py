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

from hermes_exp.money.cost import text_sizes, tokens_from_sizes

_last = threading.local()  # the pieces of this thread's last body
# Tool lists' pieces, shared by every thread: a run sends one list per toolset draw (tools.registry),
# the same object to every session, so each is serialised once per run, not once per task and thread.
_TOOL_LISTS: dict[int, "_Piece"] = {}
_MAX_TOOL_LISTS = 64  # other callers' lists: past this many, the cache starts again


# One encoder each, made once: json.dumps with these options builds a JSONEncoder on every call.
# Same text as json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False), and as
# json.dumps(value, ensure_ascii=False) for the estimate.
dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_estimate_dumps = json.JSONEncoder(ensure_ascii=False).encode


_NO_TOOLS: list[dict[str, Any]] = []


class _Piece:
    """One value (a message, the tool list) as sent, and the sizes the estimate counts it at."""

    __slots__ = ("value", "wire", "ascii", "other")

    def __init__(self, value: Any) -> None:
        self.value = value  # held, so the identity check below cannot match a new object at its address
        self.wire = dumps(value)
        self.ascii, self.other = text_sizes(_estimate_dumps(value))


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
    known = getattr(_last, "members", None)
    if known is None:
        known = _last.members = {}
    members = []
    for key, value in body.items():
        if key == "messages":
            members.append('"messages":[' + ",".join(p.wire for p in pieces) + "]")
        elif key == "tools":
            members.append('"tools":' + tools.wire)
        else:
            members.append(_member(known, key, value))
    # the estimate's JSON of the message list has ", " between messages and the brackets around them
    ascii_chars = sum(p.ascii for p in pieces) + 2 * max(len(pieces), 1) + tools.ascii
    other_bytes = sum(p.other for p in pieces) + tools.other
    return ("{" + ",".join(members) + "}").encode(), tokens_from_sizes(ascii_chars, other_bytes)


def body_bytes(body: dict[str, Any]) -> bytes:
    """`body` as compact JSON, byte for byte what one json.dumps gives."""
    return encode(body)[0]


def _member(known: dict[str, tuple[Any, str]], key: str, value: Any) -> str:
    """`"key":value` as sent. The other members (model, sampling, extra_body) are the client's one
    request's values in every call: each is serialised once per thread while it is the same object
    (held, so its address cannot be reused meanwhile)."""
    held = known.get(key)
    if held is None or held[0] is not value:
        held = known[key] = (value, f"{dumps(key)}:{dumps(value)}")
    return held[1]


def forget() -> None:
    """Drop this thread's pieces (its conversation, serialised): called when a conversation ends, so an
    idle session thread holds none of it while the run goes on."""
    _last.__dict__.clear()


class Body:
    """One call's request body, encoded once for its estimate and its first send. The send takes the
    bytes (the HTTP client holds them until the answer is in); a retry encodes the same request again:
    the same bytes, from the thread's pieces of its messages."""

    __slots__ = ("_request", "_content", "prompt_tokens")

    def __init__(self, request: dict[str, Any]) -> None:
        self._request = request
        self._content: bytes | None
        self._content, self.prompt_tokens = encode(request)

    def take(self) -> bytes:
        content, self._content = self._content, None
        return encode(self._request)[0] if content is None else content
