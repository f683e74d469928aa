"""Canonical JSON: the one spelling of a value that identities and task keys hash (sorted keys, compact
separators, text as it is)."""

from __future__ import annotations

import json
from typing import Any


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
