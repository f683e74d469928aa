"""The mock server's prompt cache, as Anthropic's works: a request's prefix up to a `cache_control`
breakpoint is written to the cache, and a later request with the same prefix reads it. Usage reports
`prompt_tokens_details.cached_tokens` and `cache_write_tokens` as OpenRouter does. Without markers,
nothing is cached."""

from __future__ import annotations

import threading
from typing import Any

from hermes_exp.mock.model import canon, digest


def _plain(message: Any) -> Any:
    """A message without its markers: they decide where the cache is cut, not what it holds."""
    if not isinstance(message, dict):
        return message
    content = message.get("content")
    if isinstance(content, list):
        parts = [{k: v for k, v in p.items() if k != "cache_control"} if isinstance(p, dict) else p for p in content]
        text = "".join(p.get("text", "") for p in parts if isinstance(p, dict))
        content = text if all(isinstance(p, dict) and p.get("type") == "text" for p in parts) else parts
    return {**{k: v for k, v in message.items() if k != "cache_control"}, "content": content}


def _breakpoints(messages: list[Any]) -> list[int]:
    marked = []
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        parts = content if isinstance(content, list) else []
        if any(isinstance(p, dict) and p.get("cache_control") for p in parts) or (
                isinstance(message, dict) and message.get("cache_control")):
            marked.append(i)
    return marked


class PromptCache:
    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        """{cached_tokens, cache_write_tokens} of this request (tokens as the mock counts them: chars / 4),
        remembering its breakpoint prefixes for the next requests."""
        messages = body.get("messages") if isinstance(body.get("messages"), list) else []
        marks = _breakpoints(messages)
        if not marks:
            return {}
        plain = [_plain(m) for m in messages]
        tools = canon(body.get("tools") or [])
        prefixes = [(digest(tools, canon(plain[:i + 1])), len(canon(plain[:i + 1])) // 4) for i in marks]
        with self._lock:
            read = max((size for key, size in prefixes if key in self._seen), default=0)
            longest = prefixes[-1][1]
            self._seen.update(key for key, _ in prefixes)
        return {"cached_tokens": read, "cache_write_tokens": max(0, longest - read)}
