"""The Verifier protocol, the Score every verification produces, and what verifiers read of a result.

A verifier judges one finished sample. It returns a `Verdict` (reward, details) or raises
`VerifierFailed` when it could not judge at all (a timeout, a crash, a judge's provider error): that
is error class `verifier`, which never counts as passed and is retried alone by the next invocation."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from hermes_exp.model.reasoning import INLINE
from hermes_exp.sandbox.base import Sandbox

DETAILS_CHARS = 2000  # the verifier's output kept with a score (what explains it: verify/explain.py)
# The valid range of any verifier's reward (docs/verifiers.md): wide enough for penalties and points, narrow
# enough that sums, squares and intervals over a run's rewards stay exact and finite.
REWARD_LIMIT = 1e6


def reward_problem(reward: float) -> str | None:
    """Why `reward` is not a valid reward (None when it is)."""
    if not math.isfinite(reward) or abs(reward) > REWARD_LIMIT:
        return (f"the verifier's reward {reward!r} is outside the valid range {-REWARD_LIMIT:.0f}..{REWARD_LIMIT:.0f} "
                "(docs/verifiers.md); the verification is refused")
    return None


class VerifierFailed(Exception):
    """The verifier could not produce a reward (not: the sample failed). `usage` lists model calls
    it made anyway (a judge), so their cost is still counted."""

    def __init__(self, message: str, usage: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.usage = usage or []


@dataclass
class Verdict:
    """What a verifier concluded: a reward (usually 0..1) and what it saw, for a person to read."""

    reward: float
    details: str = ""
    usage: list[dict[str, Any]] = field(default_factory=list)  # model calls (a judge's), as the loop records them
    suspect: str | None = None  # why the output looks like an infrastructure failure (verify/suspect.py)
    output: str = ""  # a command's whole output (as the sandbox kept it), for the run's archives/


@dataclass
class VerifyContext:
    """What a verifier may need from the run, given at construction (not config): where relative
    `tests` folders are found, whether the sandbox is a container, and (for a judge) the run's
    model endpoint and budget."""

    base_dir: str = "."
    in_container: bool = False
    runtime: Any = None  # the worker's Runtime (a judge shares its client's budget); None in the parent
    settings: dict[str, Any] | None = None  # the run's settings (a judge reads invocation.base_url)


class Verifier(Protocol):
    """One kind of verification, built from its `conf/verifier/*.yaml` plus the row's overrides.

    `needs_sandbox`: verify() must run in the sample's sandbox after the agent's last turn (a `command`
    verifier); the others judge the finished result alone and can re-score from the ledger.
    verify() raises VerifierFailed when it cannot judge; any other exception is treated the same."""

    needs_sandbox: bool
    pass_threshold: float

    def verify(self, sandbox: Sandbox | None, row: dict[str, Any], result: dict[str, Any]) -> Verdict: ...

    def row_problem(self, row: dict[str, Any]) -> str | None:
        """What the row lacks for this verifier (None when it can be verified): checked for every row
        before any model call, so a missing `expected` or `verify` is bad input, not a failed sample."""
        ...


@dataclass
class Score:
    """One verification of one sample, as stored in the ledger's `scores` table (key, verifier)."""

    verifier: str  # the verifier identity (hash of its effective config)
    kind: str
    reward: float | None = None
    passed: bool | None = None
    details: str = ""
    seconds: float = 0.0
    error: str | None = None
    usage: list[dict[str, Any]] = field(default_factory=list)
    suspect: str | None = None  # verifier_suspect: a reward that did not pass, with an infrastructure failure's signs
    output: str | None = None  # a command's whole output: kept in the run's archives/, not in the ledger

    @property
    def cost_usd(self) -> float:
        return sum(u.get("cost_usd") or 0.0 for u in self.usage)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def clip(text: str, limit: int = DETAILS_CHARS) -> str:
    """Head and tail of `text` within `limit` characters."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    return f"{text[:head]}\n[... {len(text) - limit} characters dropped ...]\n{text[len(text) - (limit - head):]}"


def content_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def final_answer(result: dict[str, Any]) -> str:
    """The last assistant message's text with its inline reasoning blocks removed ('' if none)."""
    for message in reversed(result.get("messages") or []):
        if message.get("role") == "assistant":
            return INLINE.sub("", content_text(message.get("content"))).strip()
    return ""
