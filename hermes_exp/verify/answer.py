"""`verifier=answer`: the row's `expected` against the final answer (the last assistant message's text
without its reasoning), compared by `match`: exact, contains, regex, numeric or choice."""

from __future__ import annotations

import math
import re
from typing import Any

from hermes_exp.errors import ConfigError
from hermes_exp.sandbox.base import Sandbox
from hermes_exp.verify.base import Verdict, VerifierFailed, VerifyContext, clip, final_answer

MATCHES = ("exact", "contains", "regex", "numeric", "choice")
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?")
# Where a multiple-choice letter is stated, most explicit first.
_CHOICES = (re.compile(r"(?i:answer)\W{0,3}(?:is\W{0,3})?\(?([A-J])\b"),
            re.compile(r"^\W{0,2}([A-J])(?:[).:]|\s|$)"), re.compile(r"\(([A-J])\)"))


class AnswerVerifier:
    """Reward 1.0 when the final answer matches the row's `expected` (a value or a list of accepted
    values), else 0.0. A row's own `match`, `case_sensitive`, `rel_tol`, `abs_tol` win over config."""

    needs_sandbox = False

    def __init__(self, match: str = "exact", case_sensitive: bool = False, normalize_whitespace: bool = True,
                 rel_tol: float = 1e-6, abs_tol: float = 0.0, pass_threshold: float = 1.0,
                 context: VerifyContext | None = None, **_: Any) -> None:
        if match not in MATCHES:
            raise ConfigError(f"verifier.match={match!r} is not a way to compare answers",
                              f"choose one of: {', '.join(MATCHES)}")
        self.match, self.case_sensitive, self.normalize_whitespace = match, bool(case_sensitive), bool(normalize_whitespace)
        self.rel_tol, self.abs_tol = float(rel_tol), float(abs_tol)
        self.pass_threshold = float(pass_threshold)

    def row_problem(self, row: dict[str, Any]) -> str | None:
        return None if "expected" in row else "verifier=answer needs the row's \"expected\" answer"

    def verify(self, sandbox: Sandbox | None, row: dict[str, Any], result: dict[str, Any]) -> Verdict:
        if "expected" not in row:
            raise VerifierFailed("the row has no `expected` answer for verifier=answer; add \"expected\": ... "
                                 "to the row or choose another verifier")
        expected = row["expected"] if isinstance(row["expected"], list) else [row["expected"]]
        answer = final_answer(result)
        hit = next((e for e in expected if self._matches(answer, e)), None)
        reward = 1.0 if hit is not None else 0.0
        return Verdict(reward, clip(f"match={self.match} expected={expected!r} got={answer!r}"))

    def _norm(self, text: str) -> str:
        text = " ".join(text.split()) if self.normalize_whitespace else text
        return text if self.case_sensitive else text.casefold()

    def _matches(self, answer: str, expected: Any) -> bool:
        want = str(expected)
        if self.match == "exact":
            return self._norm(answer) == self._norm(want)
        if self.match == "contains":
            return self._norm(want) in self._norm(answer)
        if self.match == "regex":
            try:
                flags = 0 if self.case_sensitive else re.IGNORECASE
                return re.search(want, answer, flags | re.DOTALL) is not None
            except re.error as exc:
                raise VerifierFailed(f"expected regex {want!r} does not compile: {exc}") from exc
        if self.match == "numeric":
            return self._numeric(answer, want)
        return self._choice(answer, want)

    def _numeric(self, answer: str, want: str) -> bool:
        try:
            target = float(want.replace(",", ""))
        except ValueError as exc:
            raise VerifierFailed(f"expected {want!r} is not a number (match=numeric)") from exc
        numbers = [m.group(0) for m in _NUMBER.finditer(answer) if any(c.isdigit() for c in m.group(0))]
        if not numbers:
            return False
        got = float(numbers[-1].replace(",", ""))  # the last number stated is the answer
        return math.isclose(got, target, rel_tol=self.rel_tol, abs_tol=self.abs_tol)

    @staticmethod
    def _choice(answer: str, want: str) -> bool:
        """A..J: 'Answer: B', 'The answer is (B)', 'B) because ...', '(B)' -- the last such statement."""
        for pattern in _CHOICES:
            letters = pattern.findall(answer.strip())
            if letters:
                return letters[-1].upper() == want.strip().strip("()").upper()
        return False
