"""Which turns of a ShareGPT row to summarise (pure): the head (first system, human, gpt and tool
turns) and the last `keep_last_turns` turns are protected; from the middle, just enough turns to fit
the target. A region never starts or ends between a `gpt` turn and the `tool` turn answering it."""

from __future__ import annotations

from dataclasses import dataclass

Turn = dict[str, str]
HEAD_ROLES = ("system", "human", "gpt", "tool")


@dataclass(frozen=True)
class Region:
    start: int   # first summarised turn
    until: int   # first turn kept after the summary
    tokens: int  # tokens of the turns it replaces


def _clean(turns: list[Turn], i: int) -> bool:
    """A cut before turn i keeps every tool call with its response: a tool turn answers the gpt turn
    right before it, so only a non-tool turn (or the end) is a clean place to cut."""
    return i >= len(turns) or turns[i].get("from") != "tool"


def middle(turns: list[Turn], keep_last: int) -> tuple[int, int]:
    """[start, end) of the turns that may be summarised, both at clean cuts (start may equal end)."""
    first: dict[str, int] = {}
    for i, turn in enumerate(turns):
        first.setdefault(turn.get("from", ""), i)
    head = [first[r] for r in HEAD_ROLES if r in first]
    start = max(head) + 1 if head else 0
    while not _clean(turns, start):
        start += 1
    end = max(start, len(turns) - keep_last)
    while end > start and not _clean(turns, end):
        end -= 1  # the tail's first turn answers a call in the middle: keep the pair in the tail
    return start, end


def plan(turns: list[Turn], counts: list[int], target: int, summary_tokens: int, keep_last: int) -> Region | None:
    """The shortest region from the start of the middle whose replacement by a summary of about
    `summary_tokens` brings the row to `target`; None when even summarising the whole middle into
    nothing could not (the row cannot fit: no model call is spent on it)."""
    start, end = middle(turns, keep_last)
    total = sum(counts)
    if start >= end or total - sum(counts[start:end]) > target:
        return None
    need = total - target + summary_tokens
    until, saved = start, 0
    while until < end and (saved < need or not _clean(turns, until)):
        saved += counts[until]
        until += 1
    return Region(start, until, saved)


def assemble(turns: list[Turn], region: Region, summary: str, notice: str | None) -> list[Turn]:
    """Head (the system turn told that some turns are summarised), one human summary turn, the rest."""
    head = [dict(t) for t in turns[:region.start]]
    if notice and head and head[0].get("from") == "system":
        head[0]["value"] += notice
    return [*head, {"from": "human", "value": summary}, *(dict(t) for t in turns[region.until:])]
