"""Split ShareGPT turn values into typed parts (text, reasoning, tool call, tool response) for the browser."""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

_BLOCK = re.compile(r"<(think|REASONING_SCRATCHPAD|tool_call|tool_response)>(.*?)</\1>", re.DOTALL)
_KIND = {"think": "think", "REASONING_SCRATCHPAD": "think", "tool_call": "tool_call",
         "tool_response": "tool_response"}


def _pretty(text: str) -> str:
    """Indented JSON when the block is JSON (tool calls and responses are), else the text as is."""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except (json.JSONDecodeError, ValueError):
        return text


def parts(value: str) -> list[list[str]]:
    """`[[kind, text], ...]` in order; kind is text, think, tool_call or tool_response.

    An empty `<think></think>` stays as a think part with empty text: it marks a turn without reasoning."""
    out: list[list[str]] = []
    pos = 0
    for match in _BLOCK.finditer(value):
        before = value[pos:match.start()].strip()
        if before:
            out.append(["text", before])
        kind = _KIND[match.group(1)]
        body = match.group(2).strip()
        out.append([kind, _pretty(body) if kind != "think" else body])
        pos = match.end()
    rest = value[pos:].strip()
    if rest:
        out.append(["text", rest])
    return out


class Score(NamedTuple):
    """A sample's number and its verifier's verdict (reward and passed are None when not verified)."""

    sample: int | None = None
    reward: float | None = None
    passed: bool | None = None
    verifier_error: bool = False
    suspect: bool = False  # verifier_suspect: a zero whose verification shows an infrastructure failure

    @property
    def verdict(self) -> str | None:
        """passed | failed | suspect (verifier_suspect) | error (the verification itself failed) | None (not verified)."""
        if self.verifier_error:
            return "error"
        if self.suspect:
            return "suspect"
        return None if self.passed is None else ("passed" if self.passed else "failed")


def entry(run: str, index: int | None, state: str, why: str | None, prompt: str,
          turns: list[dict[str, str]], score: Score = Score(),
          timings: dict[str, float] | None = None) -> dict[str, Any]:
    """One trajectory as the browser's JavaScript reads it (short keys: thousands are embedded).
    `timings`: seconds per phase of the task (None for results recorded before they were kept)."""
    return {"run": run, "index": index, "sample": score.sample, "state": state, "why": why, "prompt": prompt,
            "reward": score.reward, "verdict": score.verdict, "timings": timings or None,
            "turns": [{"from": t.get("from", ""), "parts": _turn_parts(t)} for t in turns]}


def _turn_parts(turn: dict[str, str]) -> list[list[str]]:
    value = turn.get("value") or ""
    # Only model and tool turns carry blocks; a prompt that mentions <think> is just text.
    return parts(value) if turn.get("from") in ("gpt", "tool") else [["text", value]]
