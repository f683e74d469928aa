"""One rate limiter shared by every worker of a process: an adaptive concurrency limit (AIMD: cut
on 429, grow back slowly) plus optional requests-per-minute and tokens-per-minute caps."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import Any

from hermes_exp.settings.sections import Section
from hermes_exp.errors import ConfigError

WINDOW = 60.0  # seconds: the per-minute caps look this far back


@dataclass(frozen=True)
class LimiterStats:
    """What the progress line shows of a process's limiter: its concurrency limit and the 429s it has seen."""

    concurrency: int
    rate_limited: int


@dataclass(frozen=True)
class Limits:
    max_concurrency: int
    min_concurrency: int = 1
    decrease_factor: float = 0.8
    cooldown_seconds: float = 1.0
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None

    @classmethod
    def from_config(cls, raw: dict[str, Any] | None, workers: int) -> Limits:
        section = Section("model.rate_limit", raw).only(cls.__dataclass_fields__)
        values = {k: v for k, v in section.raw.items() if v is not None}
        values.setdefault("max_concurrency", workers)
        limits = cls(**values)
        limits._check()
        return limits

    def share(self, processes: int) -> Limits:
        """One of `processes` worker processes' part of the run's limits (each has its own limiter)."""
        if processes <= 1:
            return self
        part = lambda n: None if n is None else max(1, -(-n // processes))  # noqa: E731
        top = part(self.max_concurrency)
        return replace(self, max_concurrency=top, min_concurrency=min(self.min_concurrency, top),
                       requests_per_minute=part(self.requests_per_minute),
                       tokens_per_minute=part(self.tokens_per_minute))

    def _check(self) -> None:
        section = Section("model.rate_limit", vars(self))
        for key in ("max_concurrency", "min_concurrency", "requests_per_minute", "tokens_per_minute"):
            section.number(key, integer=True, positive=True, fix=f"set model.rate_limit.{key}=<n >= 1> or null")
        section.number("cooldown_seconds", low=0)
        fix = "set model.rate_limit.decrease_factor=0.8 (the limit is multiplied by it on a 429)"
        if section.number("decrease_factor", low=0, high=1, fix=fix) in (0, 1):
            raise ConfigError(f"model.rate_limit.decrease_factor={self.decrease_factor!r} must be between 0 and 1, "
                              "exclusive", fix)
        if self.min_concurrency > self.max_concurrency:
            raise ConfigError(f"model.rate_limit.min_concurrency={self.min_concurrency} is above "
                              f"max_concurrency={self.max_concurrency}", "lower min_concurrency")


class RateLimiter:
    """`acquire` blocks until a call may start; `release` reports how it went and adapts the limit."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._limit = float(limits.max_concurrency)
        self._in_flight = 0
        self._last_cut = float("-inf")
        self._requests: deque[float] = deque()
        self._tokens: deque[list[float]] = deque()  # [time, tokens]; the estimate is corrected on release
        self._total_429s = 0
        self._cond = threading.Condition()

    def acquire(self, tokens: int = 0) -> list[float]:
        """Wait for a free slot and room in the per-minute caps; returns a ticket for `release`."""
        with self._cond:
            while True:
                delay = self._delay(tokens, time.monotonic())
                if delay == 0.0:
                    break
                self._cond.wait(timeout=delay)
            now = time.monotonic()
            self._in_flight += 1
            self._requests.append(now)
            ticket = [now, float(tokens)]
            self._tokens.append(ticket)
            return ticket

    def _delay(self, tokens: int, now: float) -> float:
        """0 when a call may start now, else how long to wait before looking again."""
        self._expire(now)
        if self._in_flight >= max(1, int(self._limit)):
            return WINDOW  # woken by the release that frees a slot
        rpm, tpm = self.limits.requests_per_minute, self.limits.tokens_per_minute
        if rpm and len(self._requests) >= rpm:
            return self._requests[0] + WINDOW - now
        if tpm and self._tokens and sum(t for _, t in self._tokens) + tokens > tpm:
            return self._tokens[0][0] + WINDOW - now
        return 0.0

    def _expire(self, now: float) -> None:
        while self._requests and self._requests[0] <= now - WINDOW:
            self._requests.popleft()
        while self._tokens and self._tokens[0][0] <= now - WINDOW:
            self._tokens.popleft()

    def release(self, ticket: list[float], rate_limited: bool = False, tokens: int | None = None) -> None:
        """A 429 cuts the limit (at most once per cooldown); a success grows it by 1/limit."""
        with self._cond:
            self._in_flight -= 1
            if tokens is not None:
                ticket[1] = float(tokens)
            now = time.monotonic()
            if rate_limited:
                self._total_429s += 1
                if now - self._last_cut >= self.limits.cooldown_seconds:
                    self._limit = max(float(self.limits.min_concurrency), self._limit * self.limits.decrease_factor)
                    self._last_cut = now
            elif now - self._last_cut >= self.limits.cooldown_seconds:
                self._limit = min(float(self.limits.max_concurrency), self._limit + 1.0 / self._limit)
            self._cond.notify_all()

    def stats(self) -> LimiterStats:
        with self._cond:
            return LimiterStats(max(1, int(self._limit)), self._total_429s)

