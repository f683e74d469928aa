"""`verifier_suspect`: a verification that gave a reward, but whose output or exit status shows the environment
failed (a download, DNS or connection error, a test runner that is not there, exit status 126/127), so its
zero may not be the agent's. The patterns are config (`verifier.infra_patterns`, `verifier.infra_exit_codes`);
the matched reason is kept with the score, and the reward is kept too (the statistics show both rates)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from hermes_exp.errors import ConfigError

LINE_CHARS = 200  # of the output line a pattern matched, kept in the reason
EXIT_MEANING = {126: "a command that cannot be executed", 127: "a command that is not installed"}


@dataclass(frozen=True)
class InfraRules:
    """The compiled `verifier.infra_patterns` and the `verifier.infra_exit_codes`; empty: nothing is suspect."""

    patterns: tuple[re.Pattern[str], ...] = ()
    exit_codes: frozenset[int] = frozenset()

    def reason(self, output: str, exit_code: int | None) -> str | None:
        """Why this verification looks like an infrastructure failure (None when it does not)."""
        if exit_code in self.exit_codes:
            meaning = EXIT_MEANING.get(exit_code, "an exit status of verifier.infra_exit_codes")
            return f"the verify command exited {exit_code} ({meaning}; verifier.infra_exit_codes)"
        for i, pattern in enumerate(self.patterns):
            found = pattern.search(output)
            if found:
                return f"{_line(output, found.start())!r} (verifier.infra_patterns[{i}] {pattern.pattern!r})"
        return None


def _line(output: str, at: int) -> str:
    """The whole output line around position `at`, stripped and cut to LINE_CHARS."""
    start = output.rfind("\n", 0, at) + 1
    end = output.find("\n", at)
    return output[start:end if end >= 0 else len(output)].strip()[:LINE_CHARS]


def rules(patterns: Iterable[str] | None, exit_codes: Iterable[int] | None) -> InfraRules:
    """Compile the configured rules; raise ConfigError naming the bad entry, its error and the fix."""
    return InfraRules(tuple(_compile(i, p) for i, p in enumerate(_listed("infra_patterns", patterns))),
                      frozenset(_code(i, c) for i, c in enumerate(_listed("infra_exit_codes", exit_codes))))


def _listed(key: str, value: Iterable | None) -> list:
    if value is None:
        return []
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Iterable):
        raise ConfigError(f"verifier.{key} must be a list, got {value!r}",
                          f"give a list, e.g. verifier.{key}='[...]', or [] to turn the check off")
    return list(value)


def _compile(i: int, pattern: object) -> re.Pattern[str]:
    fix = "write a Python regular expression (docs/verifiers.md), or remove the entry"
    if not isinstance(pattern, str) or not pattern:
        raise ConfigError(f"verifier.infra_patterns[{i}] must be a non-empty regular expression, got {pattern!r}", fix)
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"verifier.infra_patterns[{i}] {pattern!r} is not a valid regular expression: {exc}",
                          fix) from exc


def _code(i: int, code: object) -> int:
    if isinstance(code, bool) or not isinstance(code, int) or not 0 < code < 256:
        raise ConfigError(f"verifier.infra_exit_codes[{i}] must be an exit status 1..255, got {code!r}",
                          "e.g. verifier.infra_exit_codes='[126,127]', or [] to turn the check off")
    return code
