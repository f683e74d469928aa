"""The run's secret values (API keys read from the environment variables the config names, and an OTLP
collector's headers when the run exports spans): redacted from every error text that is stored or printed,
and wiped from the process's own environment block, which a tool command could otherwise read through
/proc/$PPID/environ."""

from __future__ import annotations

import json
import os
from typing import Any

# Shorter values are not treated as keys: redacting "1" or "x" everywhere would wreck every text.
MIN_SECRET_CHARS = 8
# The config keys that name an environment variable holding a secret.
KEY_ENV_PATHS = (("provider", "api_key_env"), ("model", "api_key_env"))
# Where the OTLP exporter reads a collector's headers (its API key) when the run exports spans
# (tracing.otlp_endpoint): secrets too, when set.
TRACING_HEADER_ENVS = ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS")


def secret_names(settings: dict[str, Any]) -> list[str]:
    names = []
    for group, key in KEY_ENV_PATHS:
        name = (settings.get(group) or {}).get(key)
        if isinstance(name, str) and name and name not in names:
            names.append(name)
    if (settings.get("tracing") or {}).get("otlp_endpoint"):
        names += [name for name in TRACING_HEADER_ENVS if os.environ.get(name)]
    return names


class Redactor:
    """Replaces each secret value with `[REDACTED:$NAME]`, also in its JSON-escaped form."""

    def __init__(self, secrets: dict[str, str]) -> None:
        pairs: list[tuple[str, str]] = []
        for name, value in secrets.items():
            if len(value) >= MIN_SECRET_CHARS:
                mark = f"[REDACTED:${name}]"
                for form in {value, json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1]}:
                    pairs.append((form, mark))
        self._pairs = sorted(pairs, key=lambda p: -len(p[0]))  # a longer secret first, if one holds another

    @classmethod
    def from_env(cls, settings: dict[str, Any]) -> Redactor:
        return cls({name: os.environ[name] for name in secret_names(settings) if os.environ.get(name)})

    def __bool__(self) -> bool:
        return bool(self._pairs)

    def __call__(self, text: str) -> str:
        for value, mark in self._pairs:
            if value in text:
                text = text.replace(value, mark)
        return text

    def strings(self, value: Any) -> Any:
        """Every string inside a JSON-like value, redacted (dict keys too)."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            return {self.strings(k): self.strings(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.strings(v) for v in value]
        return value


def wipe_environ_block(names: list[str]) -> bool:
    """Overwrite the values of `names` in this process's initial environment block (what
    /proc/<pid>/environ shows), which unsetting a variable leaves in place. os.environ and the C
    environment keep a copy on the heap, so worker processes started later still inherit the key (and
    wipe their own block). False when the kernel does not let the process write its own memory."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end: fields 50, 51 of proc(5), after "pid (comm)"
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            block = bytearray(mem.read(end - start))
            changed = False
            for name in names:
                prefix = name.encode() + b"="
                if block.startswith(prefix):
                    at = 0
                elif (found := block.find(b"\0" + prefix)) >= 0:
                    at = found + 1
                else:
                    continue
                value_at = at + len(prefix)
                value_end = block.find(b"\0", value_at)
                value_end = len(block) if value_end < 0 else value_end
                block[value_at:value_end] = b"\0" * (value_end - value_at)
                changed = True
            if changed:
                mem.seek(start)
                mem.write(bytes(block))
    except (OSError, ValueError, IndexError):
        return False
    for name in names:  # the C environment pointed into the block: give children the value again
        if os.environ.get(name):
            os.putenv(name, os.environ[name])
    return True
