"""The base images a Dockerfile builds on: its `FROM` lines, with the `ARG` defaults declared before
the first one substituted (hermes-exp passes no build arguments, so the defaults are what a build
uses), stage names and `scratch` left out. A built image is reused only while these resolve to the
images they resolved to when it was built (sandbox/images.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, its arguments) of each instruction, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        whole = (pending + stripped).strip()
        pending = ""
        if whole:
            word, _, rest = whole.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def base_images(dockerfile: Path) -> list[str]:
    """The images the Dockerfile's stages start from, in order, without repeats."""
    try:
        text = dockerfile.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []  # the build reports a missing Dockerfile itself
    args: dict[str, str] = {}
    stages: set[str] = set()
    bases: list[str] = []
    seen_from = False
    for word, rest in instructions(text):
        if word == "ARG" and not seen_from:
            name, _, default = rest.partition("=")
            args[name.strip()] = default.strip().strip('"\'')
        elif word == "FROM":
            seen_from = True
            parts = [p for p in _split(rest) if not p.startswith("--")]
            if not parts:
                continue
            image = _substitute(parts[0], args)
            if len(parts) >= 3 and parts[1].lower() == "as":
                stages.add(parts[2].lower())
            if image.lower() not in stages and image.lower() != "scratch" and image not in bases:
                bases.append(image)
    return bases


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _substitute(text: str, args: dict[str, str]) -> str:
    return _VARIABLE.sub(lambda m: args.get(m.group(1) or m.group(3)) or (m.group(2) or ""), text)
