"""The verifier options every kind reads with a bare `bool()` / `float()` / `int()`, checked before a
verifier is built (config_section). `case_sensitive=no` is the string "no" to Hydra, and a CSV row's
`case_sensitive` column is the string "false": `bool()` takes both for true, and every answer would be
compared the wrong way without a word. A row's own option is checked the same way, so a bad row is
reported with its line before any model call (verify/rows.py)."""

from __future__ import annotations

from typing import Any

from hermes_exp.settings.sections import Section

FLAGS = ("case_sensitive", "normalize_whitespace", "require_reward_file", "keep_workdir", "archive_on_error")
# key -> what config_section.number checks it for (the unit names what the number is)
NUMBERS: dict[str, dict[str, Any]] = {
    "pass_threshold": {"unit": "a sample passes at a reward >= this"},
    "rel_tol": {"low": 0, "unit": "relative tolerance of match=numeric"},
    "abs_tol": {"low": 0, "unit": "absolute tolerance of match=numeric"},
    "timeout_seconds": {"positive": True, "unit": "seconds the verify command may take"},
    "archive_max_mb": {"low": 0, "unit": "MB of a kept workdir archive, compressed"},
    "max_transcript_chars": {"positive": True, "integer": True, "unit": "characters of the transcript a judge reads"},
    "details_chars": {"positive": True, "integer": True, "unit": "characters of a verdict's details kept"},
}


def check(cfg: dict[str, Any]) -> None:
    """Raise ConfigError naming the key, the bad value and the fix for a flag that is not true/false
    or a number that is not one (or out of range). Absent and null keys are left to the defaults."""
    section = Section("verifier", cfg)
    for key in FLAGS:
        if cfg.get(key) is not None:
            section.flag(key)
    for key, bounds in NUMBERS.items():
        if cfg.get(key) is not None:
            section.number(key, required=True, **bounds)
