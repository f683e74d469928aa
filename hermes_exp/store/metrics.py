"""Metrics a person can compare across models: mean reward with a 95% confidence interval (Wilson's when
every reward lies in [0, 1], so the interval never leaves it), pass rate with its Wilson interval,
the unbiased pass@k estimator (Chen et al. 2021) for every k <= samples_per_prompt, pass^k (all k
samples pass, as in tau-bench), per-prompt pass rates, the count of failed verifications, and the pass
rate and pass@k / pass^k without the verifier_suspect samples (a zero whose verification shows an
infrastructure failure)."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from hermes_exp.stops import Stop

Z95 = 1.959963984540054


def pass_at_k(n: int, c: int, k: int) -> float:
    """P(at least one of k samples drawn without replacement from n, c of them correct, passes)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """P(all k samples drawn without replacement from n, c of them correct, pass)."""
    return math.comb(c, k) / math.comb(n, k) if k <= n else 0.0


def wilson(passed: float, n: int) -> list[float] | None:
    """The Wilson score interval of a rate (sound at 0% and 100%, unlike the normal one). `passed` may be a
    sum of rewards in [0, 1]: a [0, 1] variable's variance is at most the Bernoulli one of its mean, so the
    interval stays conservative and inside [0, 1]."""
    if n == 0:
        return None
    p, z2 = passed / n, Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(max(0.0, p * (1 - p)) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return [round(max(0.0, centre - half), 6), round(min(1.0, centre + half), 6)]


def mean_ci(total: float, total_sq: float, n: int,
            unit: bool = False) -> tuple[float | None, float | None, float | None]:
    """Mean and its 95% interval from running sums (None when n == 0): Wilson's when `unit` (every reward
    in [0, 1]), else the normal approximation."""
    if n == 0:
        return None, None, None
    mean = total / n
    if unit:
        lo, hi = wilson(total, n)  # type: ignore[misc]
        return mean, lo, hi
    if n == 1:
        return mean, None, None
    var = max(0.0, (total_sq - n * mean * mean) / (n - 1))
    half = Z95 * math.sqrt(var / n)
    return mean, mean - half, mean + half


class VerifyStats:
    """Fed one ledger row (and its score) at a time; per-prompt counts are two integers per prompt."""

    def __init__(self) -> None:
        self.kinds: Counter[str] = Counter()
        self.scored = self.passed = self.verifier_errors = self.unscored = 0
        self.reward_sum = self.reward_sq = 0.0
        self.unit_rewards = True  # every reward so far lies in [0, 1]
        self.cost_usd = 0.0
        self.judge_calls = 0
        self.per_prompt: dict[int, list[int]] = {}  # prompt_index -> [scored samples, passed samples]
        self.trusted: dict[int, list[int]] = {}  # the same without the verifier_suspect samples
        self.archives = self.archive_bytes = 0
        self.errored_prompts: set[int] = set()
        self.no_solution: set[int] = set()  # agent=oracle: prompts whose row has no solution to run
        self.suspect = Suspects()

    def add(self, row: dict[str, Any], score: dict[str, Any] | None) -> None:
        if row.get("stop_reason") == Stop.ORACLE_NO_SOLUTION:
            self.no_solution.add(int(row["prompt_index"]))
        if row.get("archive"):
            self.archives += 1
            self.archive_bytes += row.get("archive_bytes") or 0
        if row["state"] == "error" and row.get("error_class") == "verifier":
            self.verifier_errors += 1
            self.errored_prompts.add(int(row["prompt_index"]))
            return
        if score is None:
            return
        self.cost_usd += score.get("cost_usd") or 0.0
        self.judge_calls += score.get("api_calls") or 0
        if score.get("reward") is None:
            self.unscored += 1
            return
        reward = float(score["reward"])
        self.scored += 1
        self.passed += bool(score.get("passed"))
        self.reward_sum += reward
        self.reward_sq += reward * reward
        self.unit_rewards = self.unit_rewards and 0.0 <= reward <= 1.0
        self.suspect.add(row, score, reward)
        for book in (self.per_prompt, self.trusted) if not score.get("suspect") else (self.per_prompt,):
            counts = book.setdefault(int(row["prompt_index"]), [0, 0])
            counts[0] += 1
            counts[1] += bool(score.get("passed"))

    def broken(self, agent: str) -> list[dict[str, Any]]:
        """Control runs: the tasks whose oracle fails (or cannot be verified) or whose nop passes."""
        if agent == "oracle":
            bad = {i for i, (n, c) in self.per_prompt.items() if c < n} | self.errored_prompts
            why = "the oracle's solution does not pass"
        elif agent == "nop":
            bad, why = {i for i, (n, c) in self.per_prompt.items() if c > 0}, "passes without doing anything"
        else:
            return []
        return [{"prompt_index": i, "line": i + 1, "why": "no solution" if i in self.no_solution else why}
                for i in sorted(bad)]

    def build(self, samples_per_prompt: int, agent: str = "model") -> dict[str, Any] | None:
        if not (self.scored or self.verifier_errors or self.unscored):
            return None
        mean, lo, hi = mean_ci(self.reward_sum, self.reward_sq, self.scored, unit=self.unit_rewards)
        return {
            "scored": self.scored, "passed": self.passed,
            "pass_rate": _round(self.passed / self.scored) if self.scored else None,
            "pass_rate_ci95": wilson(self.passed, self.scored),
            "mean_reward": _round(mean), "mean_reward_ci95": [_round(lo), _round(hi)],
            "pass_at_k": _over_prompts(self.per_prompt, pass_at_k, samples_per_prompt),
            "pass_hat_k": _over_prompts(self.per_prompt, pass_hat_k, samples_per_prompt),
            # a suspect sample is no draw of the agent's: the estimators over the other samples of each prompt
            "pass_at_k_without_suspect": _over_prompts(self.trusted, pass_at_k, samples_per_prompt),
            "pass_hat_k_without_suspect": _over_prompts(self.trusted, pass_hat_k, samples_per_prompt),
            "prompts": len(self.per_prompt),
            "per_prompt_pass_rate": {str(i): _round(c / n) for i, (n, c) in sorted(self.per_prompt.items())},
            "verifier_errors": self.verifier_errors,
            **self.suspect.build(self.scored, self.passed, self.reward_sum),
            "unscored": self.unscored,  # finished samples with no score under the current verifier yet
            "judge_api_calls": self.judge_calls, "judge_cost_usd": round(self.cost_usd, 8),
            "archives": self.archives, "archive_bytes": self.archive_bytes,  # workdirs kept for re-verification
            "agent": agent, "broken_tasks": self.broken(agent),
        }


def _over_prompts(per_prompt: dict[int, list[int]], fn: Any, samples: int) -> dict[str, float]:
    """The estimator for each k <= samples, averaged over prompts that have at least k scored samples."""
    out: dict[str, float] = {}
    for k in range(1, max(1, samples) + 1):
        values = [fn(n, c, k) for n, c in per_prompt.values() if n >= k]
        if values:
            out[str(k)] = _round(sum(values) / len(values))
    return out


class Suspects:
    """The scored samples marked verifier_suspect: how many, their rewards, and which (the first SHOWN)."""

    SHOWN = 50

    def __init__(self) -> None:
        self.count = self.passed = 0
        self.reward_sum = 0.0
        self.samples: list[dict[str, Any]] = []

    def add(self, row: dict[str, Any], score: dict[str, Any], reward: float) -> None:
        if not score.get("suspect"):
            return
        self.count += 1
        self.passed += bool(score.get("passed"))
        self.reward_sum += reward
        if len(self.samples) < self.SHOWN:
            self.samples.append({"prompt_index": int(row["prompt_index"]), "sample": row.get("sample") or 0,
                                 "reason": score["suspect"]})

    def build(self, scored: int, passed: int, reward_sum: float) -> dict[str, Any]:
        """statistics.json's keys: the count, and pass rate and mean reward over the other scored samples."""
        trusted = scored - self.count
        return {"suspect": self.count,
                "pass_rate_without_suspect": _round((passed - self.passed) / trusted) if trusted else None,
                "mean_reward_without_suspect": _round((reward_sum - self.reward_sum) / trusted) if trusted else None,
                "suspect_samples": self.samples}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def summary_line(v: dict[str, Any] | None) -> str:
    """One line for the final summary: pass rate, mean reward with its interval, pass@k, errors."""
    if not v:
        return ""
    parts = []
    if v["scored"]:
        parts.append(f"{v['passed']}/{v['scored']} passed ({100 * v['pass_rate']:.1f}%)")
        lo, hi = v["mean_reward_ci95"]
        parts.append(f"mean reward {v['mean_reward']:.3f}" + (f" [95% CI {lo:.3f}, {hi:.3f}]" if lo is not None else ""))
        ks = v["pass_at_k"]
        if len(ks) > 1:
            parts.append(" ".join(f"pass@{k} {p:.3f}" for k, p in ks.items()))
    if v["verifier_errors"]:
        parts.append(f"{v['verifier_errors']} verification(s) failed (class verifier: the same command verifies them again)")
    if v.get("suspect"):
        parts.append(_suspect_part(v))
    if v["unscored"]:
        parts.append(f"{v['unscored']} not scored by the current verifier (action=score scores them)")
    line = "  verified: " + ", ".join(parts)
    if v.get("agent") in ("oracle", "nop"):
        broken = v.get("broken_tasks") or []
        line += f"\n  broken tasks (agent={v['agent']}): {len(broken)}" + "".join(
            f"\n    {why}: dataset lines {_lines([b for b in broken if b['why'] == why])}"
            for why in dict.fromkeys(b["why"] for b in broken))
    return line


def _suspect_part(v: dict[str, Any]) -> str:
    """The verifier_suspect samples: how many, the pass rate without them, how to verify them again."""
    rate = v.get("pass_rate_without_suspect")
    without = f"{100 * rate:.1f}%" if rate is not None else "none left"
    return (f"{v['suspect']} verifier_suspect (a zero whose verification shows an infrastructure failure; "
            f"pass rate without them {without}; action=score score.only=suspect verifies them again)")


def _lines(broken: list[dict[str, Any]]) -> str:
    return ", ".join(str(b["line"]) for b in broken[:20]) + (" ..." if len(broken) > 20 else "")
