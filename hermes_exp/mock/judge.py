"""The mock model as a judge: a request holding <rubric> and <transcript> is graded deterministically.
REWARD = the share of the rubric's quoted phrases ("...") found in the transcript; a rubric that quotes
nothing is checked against the row's <expected> answer (any of a list) in the final answer; with neither,
there is nothing to check the work against, and the sample fails (REWARD 0)."""

from __future__ import annotations

import json
import re

_SECTION = r"<{0}>\n?(.*?)\n?</{0}>"
_QUOTED = re.compile(r'"([^"]+)"')
_ASSISTANT = "[assistant]\n"  # how verify/judge.py's transcript heads an assistant turn


def _section(name: str, prompt: str) -> str | None:
    found = re.search(_SECTION.format(name), prompt, re.DOTALL)
    return found.group(1) if found else None


def _expected(prompt: str) -> list[str]:
    """The row's expected answer(s), as the judge's prompt gives them (JSON), as text."""
    raw = (_section("expected", prompt) or "").strip()
    if not raw:
        return []
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    values = value if isinstance(value, list) else [value]
    return [v if isinstance(v, str) else json.dumps(v) for v in values if v is not None and str(v).strip()]


def _says(answer: str, value: str) -> bool:
    """`value` stands on its own in `answer` ("56" is not in "560"), case-insensitive."""
    return re.search(rf"(?<![\w.]){re.escape(value.casefold())}(?!\w)", answer.casefold()) is not None


def judge_answer(prompt: str) -> str:
    """'' unless the prompt is a judge request; else an answer ending in `REWARD: x`."""
    rubric, transcript = _section("rubric", prompt), _section("transcript", prompt)
    if rubric is None or transcript is None:
        return ""
    wanted = _QUOTED.findall(rubric)
    if wanted:
        seen = transcript.casefold()
        found = [w for w in wanted if w.casefold() in seen]
        return (f"The transcript shows {len(found)} of {len(wanted)} required phrases.\n"
                f"REWARD: {len(found) / len(wanted):.2f}")
    expected = _expected(prompt)
    if not expected:
        return ("The rubric quotes no phrase and the task gives no expected answer: nothing to check the "
                "work against, so it cannot pass.\nREWARD: 0.00")
    final = transcript.rsplit(_ASSISTANT, 1)[-1] if _ASSISTANT in transcript else ""
    right = any(_says(final, v) for v in expected)
    verdict = "gives" if right else "does not give"
    return f"The final answer {verdict} the expected {expected[0]!r}.\nREWARD: {1.0 if right else 0.0:.2f}"
