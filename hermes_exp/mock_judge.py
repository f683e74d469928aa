"""The mock model as a judge: a request holding <rubric> and <transcript> is graded deterministically,
REWARD = the share of the rubric's quoted phrases ("...") found in the transcript (1.0 without any)."""

from __future__ import annotations

import re

_SECTION = r"<{0}>\n?(.*?)\n?</{0}>"
_QUOTED = re.compile(r'"([^"]+)"')


def judge_answer(prompt: str) -> str:
    """'' unless the prompt is a judge request; else an answer ending in `REWARD: x`."""
    rubric = re.search(_SECTION.format("rubric"), prompt, re.DOTALL)
    transcript = re.search(_SECTION.format("transcript"), prompt, re.DOTALL)
    if not rubric or not transcript:
        return ""
    wanted = _QUOTED.findall(rubric.group(1))
    seen = transcript.group(1).casefold()
    found = [w for w in wanted if w.casefold() in seen]
    reward = len(found) / len(wanted) if wanted else 1.0
    return f"The transcript shows {len(found)} of {len(wanted)} required phrases.\nREWARD: {reward:.2f}"
