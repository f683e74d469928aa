"""The summary of a region of turns, from the summariser model (`compress.model`) through the same
model client as the agent (retries, rate limit, budget, pricing). A failed, truncated or empty answer
is a failure, never a placeholder kept as if it were a summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hermes_exp.errors import ProviderError

if TYPE_CHECKING:  # openai is imported only when a summary is asked for
    from hermes_exp.model.client import ModelClient

SUMMARY_MARK = "TURNS TO SUMMARIZE:"  # the offline mock model recognises a summariser request by it
PREFIX = "[CONTEXT SUMMARY]:"
_LONG_TURN = 3000  # characters of one turn shown to the summariser: the middle of a longer one is elided


@dataclass
class Summary:
    text: str | None                 # None: no usable summary (see `error`)
    error: str | None = None
    usage: list[dict[str, Any]] = field(default_factory=list)


def _shown(value: str) -> str:
    if len(value) <= _LONG_TURN:
        return value
    return f"{value[:1500]}\n...[{len(value) - 2000} characters elided]...\n{value[-500:]}"


def prompt(turns: list[dict[str, str]], start: int, target_tokens: int) -> str:
    listed = "\n\n".join(f"[Turn {start + i} - {t.get('from', '?').upper()}]:\n{_shown(t.get('value', ''))}"
                         for i, t in enumerate(turns))
    return ("Summarize the following turns of an agent conversation concisely; the summary replaces them "
            "in the conversation history. Write it in the language of the turns, from a neutral point of "
            "view: what the assistant did (tool calls, commands, files), what it learned (results, values, "
            f"file names, errors) and what it decided. Aim for about {target_tokens} tokens.\n\n---\n"
            f"{SUMMARY_MARK}\n{listed}\n---\n\nWrite only the summary, starting with \"{PREFIX}\".")


def summarise(client: ModelClient, turns: list[dict[str, str]], start: int, target_tokens: int,
              key: str | None = None) -> Summary:
    """One summariser call (the client retries transient failures), journaled under the row's task `key`
    (no per-task cap: the summary is the run's spending, not the agent's). Budget exhaustion propagates."""
    from hermes_exp.money.budget import TaskMeter

    try:
        meter = TaskMeter(None, key)
        reply = client.complete([{"role": "user", "content": prompt(turns, start, target_tokens)}], [], meter)
    except ProviderError as exc:
        if exc.stop_run:
            raise
        return Summary(None, f"summariser call failed: {exc}")
    usage = [reply.usage]
    if reply.finish_reason == "length":
        return Summary(None, "summary truncated (finish_reason=length)", usage)
    content = reply.message.get("content")
    text = (content if isinstance(content, str) else "").strip()
    if not text or text == PREFIX:
        return Summary(None, "the summariser returned an empty summary", usage)
    return Summary(text if text.startswith(PREFIX) else f"{PREFIX} {text}", None, usage)
