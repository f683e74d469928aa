"""`verifier=judge`: an LLM judge, called through the same model client as the agent (retries, rate
limit, pricing) with its own model config (`verifier.model`, `verifier.provider`). The prompt is a
template filled with the rubric and the transcript; the reward is parsed from the answer. Its calls,
tokens and cost are recorded with the sample's score and count against `budget.max_cost_usd`."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from hermes_exp.money.budget import TaskMeter
from hermes_exp.money.cost import Pricing
from hermes_exp.errors import ConfigError, ProviderError
from hermes_exp.sandbox.base import Sandbox
from hermes_exp.verify.base import Verdict, VerifierFailed, VerifyContext, clip, content_text, final_answer

# a number read whole: sign, digits, fraction, exponent
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
PLACEHOLDERS = ("rubric", "transcript", "prompt", "expected", "final_answer")


def transcript(result: dict[str, Any], limit: int) -> str:
    """The conversation as plain text for the judge (system turn left out), head and tail kept."""
    lines = []
    for message in result.get("messages") or []:
        role = message.get("role")
        if role == "system":
            continue
        text = content_text(message.get("content"))
        if role == "assistant":
            calls = [f"{(c.get('function') or {}).get('name')}({(c.get('function') or {}).get('arguments')})"
                     for c in message.get("tool_calls") or []]
            text += "".join(f"\n[calls {c}]" for c in calls)
        label = f"tool {message.get('name')}" if role == "tool" else role
        lines.append(f"[{label}]\n{text}")
    return clip("\n\n".join(lines), limit)


class JudgeVerifier:
    needs_sandbox = False

    def __init__(self, model: dict[str, Any], provider: dict[str, Any], prompt: str, rubric: str = "",
                 reward_pattern: str = r"REWARD:\s*([-+]?\d*\.?\d+)", pass_threshold: float = 0.5,
                 max_transcript_chars: int = 20000, context: VerifyContext | None = None, **_: Any) -> None:
        self.model, self.provider = dict(model or {}), dict(provider or {})
        self.template, self.rubric = str(prompt), str(rubric or "")
        try:
            self.pattern = re.compile(reward_pattern)
        except re.error as exc:
            raise ConfigError(f"verifier.reward_pattern={reward_pattern!r} is not a regular expression: {exc}",
                              "give a pattern whose first group captures the number") from exc
        self.pass_threshold = float(pass_threshold)
        self.limit = int(max_transcript_chars)
        self.context = context or VerifyContext()
        _check_model(self.model, (self.context.settings or {}).get("budget") or {})
        self._client: Any = None
        self._lock = threading.Lock()

    def client(self) -> Any:
        """The judge's client, built on first use; it books its calls with the agent's (agent/clients.py)."""
        with self._lock:
            if self._client is None:
                from hermes_exp.model.clients import second_client

                agent = getattr(self.context.runtime, "client", None)  # the run's budgets and spend journal
                self._client = second_client(self.context.settings or {}, self.model, self.provider, shared=agent)
            return self._client

    def request(self, row: dict[str, Any], result: dict[str, Any]) -> str:
        values = {"rubric": str(row.get("rubric") or self.rubric), "transcript": transcript(result, self.limit),
                  "prompt": str(row.get("prompt", "")), "final_answer": final_answer(result),
                  "expected": json.dumps(row["expected"], ensure_ascii=False) if "expected" in row else ""}
        text = self.template
        for name in PLACEHOLDERS:
            text = text.replace("{" + name + "}", values[name])
        return text

    def row_problem(self, row: dict[str, Any]) -> str | None:
        return None  # the rubric falls back to verifier.rubric

    def verify(self, sandbox: Sandbox | None, row: dict[str, Any], result: dict[str, Any]) -> Verdict:
        try:
            # journaled under the sample's key (a kill -9 mid-call still counts it); no per-task cap: a
            # judge never fails a sample for what the agent spent (budget.max_task_cost_usd)
            meter = TaskMeter(None, result.get("key"))
            reply = self.client().complete([{"role": "user", "content": self.request(row, result)}], [], meter)
        except ProviderError as exc:
            raise VerifierFailed(f"the judge's model call failed: {exc}", getattr(exc, "usage", None)) from exc
        usage = [{**reply.usage, "served_by": reply.served_by, "attempts": reply.attempts}]
        answer = content_text(reply.message.get("content"))
        try:
            reward = verdict_of(answer, self.pattern)
        except VerifierFailed as exc:
            raise VerifierFailed(str(exc), usage) from None
        return Verdict(reward, clip(answer), usage)


def verdict_of(answer: str, pattern: re.Pattern[str]) -> float:
    """The reward on the judge's own last line, which must begin with the pattern (so a `REWARD: 1` it
    quotes from the agent's transcript is not its verdict). The number is read whole from where the
    pattern's first group starts (`1e-9`, `5e-1`: a pattern's `\\d*\\.?\\d+` stops at the `e`) and must
    lie in [0, 1], the range the judge's prompt asks for."""
    lines = [line.strip().strip("*`_ ").strip() for line in answer.splitlines() if line.strip()]
    found = pattern.match(lines[-1]) if lines else None
    if found is None:
        raise VerifierFailed(f"the judge's last line is not a verdict matching {pattern.pattern!r}: "
                             f"{clip(lines[-1] if lines else answer, 300)!r}")
    start = found.start(1) if found.re.groups else found.start()
    number = NUMBER.match(lines[-1], start)
    if number is None:
        raise VerifierFailed(f"the judge's verdict holds no number: {lines[-1][:300]!r}")
    reward = float(number.group())
    if not 0.0 <= reward <= 1.0:
        raise VerifierFailed(f"the judge's reward {number.group()} is outside 0..1: {lines[-1][:300]!r}")
    return reward


def _check_model(model: dict[str, Any], budget: dict[str, Any]) -> None:
    """The judge's model, checked before any work: a `verifier.model` the user gives replaces the run's
    model as a whole (Hydra does not merge into `${model}`), so it needs its own name, and its own
    prices when a budget is set (else its calls could not be counted before they are made)."""
    whole = ("give the judge's model whole, e.g. 'verifier.model={name: gpt-4o-mini, pricing: {prompt: 0.15, "
             "completion: 0.6}}' (and verifier.provider for another endpoint), or leave verifier.model out "
             "for the run's model")
    name = model.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"verifier.model has no name: {model!r}", whole)
    if any(budget.get(k) is not None for k in ("max_cost_usd", "sweep_max_cost_usd")) and \
            Pricing.from_config(model.get("pricing")) is None:
        raise ConfigError(f"a budget is set but verifier.model.pricing is null for the judge's model {name!r}, so "
                          "the cost of a judge's call cannot be estimated before it is made",
                          "set verifier.model.pricing.prompt and .completion (USD per 1M tokens); " + whole)
