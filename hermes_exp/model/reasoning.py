"""Find the reasoning in an assistant message: native fields or inline tags in the content."""

from __future__ import annotations

import re
from typing import Any

INLINE = re.compile(r"<(think|REASONING_SCRATCHPAD)>(.*?)</\1>", re.DOTALL)


def native_reasoning(message: dict[str, Any]) -> str:
    """Text of `reasoning`, `reasoning_content` or `reasoning_details` (first one present)."""
    for key in ("reasoning", "reasoning_content"):
        value = message.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    details = message.get("reasoning_details")
    if isinstance(details, list):
        parts = [d.get("text") or d.get("summary") or "" for d in details if isinstance(d, dict)]
        text = "\n".join(p for p in parts if isinstance(p, str) and p.strip())
        if text.strip():
            return text.strip()
    return ""


def inline_reasoning(content: str | None) -> str:
    return "\n".join(m.group(2).strip() for m in INLINE.finditer(content or "") if m.group(2).strip())


def has_reasoning(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return bool(native_reasoning(message) or inline_reasoning(content if isinstance(content, str) else None))
