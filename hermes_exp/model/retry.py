"""When a failed model call is worth retrying, how long to wait first, when to give up, and the
circuit that stops a run whose calls keep failing authentication or finding no such model. No HTTP
client in here."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from typing import Any

from hermes_exp.settings.sections import Section
from hermes_exp.errors import ProviderError
from hermes_exp.stops import RunStop

# Statuses a later attempt may get past: timeouts, conflicts, rate limits, server and gateway errors.
TRANSIENT_STATUS = frozenset({408, 409, 425, 429})
# Statuses that mean "this key may not call this model": retrying cannot help, and neither can the next task.
AUTH_STATUS = frozenset({401, 402, 403})
# "No such model (or path) here" (OpenAI, vLLM, Ollama answer a wrong model name so): the same for every task.
NOT_FOUND_STATUS = frozenset({404})


@dataclass(frozen=True)
class Failure:
    """One failed attempt. `status` is None for timeouts and broken connections."""

    message: str
    status: int | None = None
    retry_after: float | None = None

    @property
    def transient(self) -> bool:
        return self.status is None or self.status in TRANSIENT_STATUS or self.status >= 500

    @property
    def auth(self) -> bool:
        return self.status in AUTH_STATUS

    @property
    def run_stop(self) -> RunStop | None:
        """The run-wide cause this failure means when calls keep getting it (the same for every task)."""
        if self.auth:
            return RunStop.AUTH
        return RunStop.NOT_FOUND if self.status in NOT_FOUND_STATUS else None

    @property
    def rate_limited(self) -> bool:
        return self.status == 429

    def error(self, attempts: int) -> ProviderError:
        """The task's error once we stop trying. An authentication failure is not retried in this run
        (nothing changes until the key does) but stays class `provider`, which a re-run retries."""
        if self.run_stop is not None:
            error = ProviderError(self.message, transient=False, stop_run=self.run_stop)
        elif self.transient:
            error = ProviderError(f"{self.message} (gave up after {attempts} attempts)", transient=True)
        else:
            error = ProviderError(self.message, transient=False)
        error.status = self.status  # read by the loop: a 400 saying the prompt is too long ends the sample
        return error


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter, bounded in attempts and in total time; Retry-After wins."""

    max_attempts: int = 5
    backoff_seconds: float = 1.0
    max_backoff_seconds: float = 30.0
    max_wait_seconds: float = 300.0
    max_retry_after_seconds: float = 120.0
    stop_after_auth_failures: int = 3

    @classmethod
    def from_config(cls, raw: dict[str, Any] | None) -> RetryPolicy:
        section = Section("model.retry", raw).only(cls.__dataclass_fields__)
        counts = {"max_attempts", "stop_after_auth_failures"}  # at least one; the rest are seconds >= 0
        return cls(**{key: section.number(key, getattr(cls, key), 1 if key in counts else 0, integer=key in counts)
                      for key in cls.__dataclass_fields__})

    def wait(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds before attempt `attempt + 1`: what the server asked for, else backoff x jitter."""
        if retry_after is not None:
            return min(retry_after, self.max_retry_after_seconds)
        return min(self.backoff_seconds * 2 ** (attempt - 1) * rng.uniform(0.5, 1.5), self.max_backoff_seconds)


def retry_after(headers: Any) -> float | None:
    """Seconds the server asked us to wait (`retry-after-ms`, else `retry-after` in seconds)."""
    if headers is None:
        return None
    for header, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(header)
        try:
            if value is not None:
                return max(0.0, float(value) * scale)
        except ValueError:  # an HTTP date: rare from model APIs; fall back to backoff
            continue
    return None


def upstream_failure(payload: dict[str, Any] | None) -> Failure | None:
    """An error reported inside an HTTP 200 body (OpenRouter's upstream-provider errors):
    `{"error": {"code": 502, ...}}`, or a choice with finish_reason "error"."""
    if not payload:
        return None
    error = payload.get("error")
    if not isinstance(error, dict):
        return None
    code = error.get("code")
    status = code if isinstance(code, int) and 400 <= code < 600 else 502
    meta = error.get("metadata") if isinstance(error.get("metadata"), dict) else {}
    who = f" from upstream provider {meta['provider_name']}" if meta.get("provider_name") else ""
    return Failure(f"error{who} inside an HTTP 200 body (code {code}): {error.get('message', '')}", status)


class AuthCircuit:
    """Opens after `threshold` failures in a row that every call would get alike (authentication, or no
    such model: `Failure.run_stop`), so a run with a wrong key or model name stops after a few calls
    instead of failing every task of the dataset. Any successful call closes it."""

    WHAT = {RunStop.AUTH: "failed authentication", RunStop.NOT_FOUND: "answered HTTP 404 (no such model or path)"}

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self._streak = 0
        self._cause: RunStop | None = None
        self._last = ""
        self._lock = threading.Lock()

    def check(self) -> None:
        """Raise instead of calling when the circuit is open."""
        with self._lock:
            if self._cause is not None and self._streak >= self.threshold:
                raise ProviderError(f"not sent: {self._streak} calls in a row {self.WHAT[self._cause]} "
                                    f"(last: {self._last})", transient=False, stop_run=self._cause)

    def record(self, failure: Failure | None) -> None:
        with self._lock:
            if failure is None:  # a success; another failure (a 5xx, a timeout) leaves the streak as it is
                self._streak, self._cause = 0, None
            elif failure.run_stop is not None:
                self._streak = self._streak + 1 if failure.run_stop == self._cause else 1
                self._cause, self._last = failure.run_stop, failure.message
