"""The part of a verify command's output that explains its score, within a size: the end (where a test
runner prints its verdict) and, when pytest ran, its failure section (the assertions that failed); never
the head, which is mostly the noise of installing and collecting. The whole output is kept apart
(the run's archives/ folder, store/scores.py)."""

from __future__ import annotations

import re

# pytest's section headers: "=== FAILURES ===", "=== ERRORS ===" (the short summary follows them)
FAILURES = re.compile(r"^=+ (?:FAILURES|ERRORS) =+\s*$", re.MULTILINE)


def dropped(n: int) -> str:
    return f"[... {n} characters dropped ...]\n"


def explaining(text: str, limit: int) -> str:
    """`text` within about `limit` characters: its tail, after pytest's failure section when it has one
    (as much of the section's start as fits). Cuts fall on line starts where one is near."""
    if len(text) <= limit:
        return text
    found = FAILURES.search(text)
    if found is None:
        return _tail(text, limit)
    tail_start = _line_start(text, max(len(text) - limit // 3, found.start()))
    section, room = text[found.start():tail_start], limit - (len(text) - tail_start)
    if len(section) > room:
        section = section[:room].rstrip("\n") + "\n" + dropped(len(section) - room)
    return (dropped(found.start()) if found.start() else "") + section + text[tail_start:]


def _tail(text: str, limit: int) -> str:
    start = _line_start(text, len(text) - limit)
    return dropped(start) + text[start:]


def _line_start(text: str, at: int) -> int:
    """The start of the line after `at` when it is within a tenth of the way to the end, else `at`."""
    newline = text.find("\n", at)
    return newline + 1 if 0 <= newline < at + max(80, (len(text) - at) // 10) else at
