"""Shared fixtures: a real mock model server on 127.0.0.1 and the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hermes_exp.mock.server import MockServer

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def mock_server(tmp_path: Path):
    """A mock model server recording every request to a file (counts work across processes)."""
    with MockServer(record_path=str(tmp_path / "requests.jsonl")) as server:
        yield server


def write_dataset(path: Path, rows: list[Any]) -> Path:
    """Rows may be dicts (dumped as JSON) or raw strings (written as they are)."""
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    return path


def run_cli(cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """`hermes-exp ARGS` as a user runs it, in `cwd`."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "hermes_exp.cli", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def done_rows(db: Path) -> int:
    """Tasks a (possibly still running) run has committed as done; 0 before its ledger exists."""
    if not db.exists():
        return 0  # connecting would create an empty file where the run's ledger goes
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("SELECT COUNT(*) FROM tasks WHERE state = 'done'").fetchone()[0]
    except sqlite3.Error:
        return 0


def known_tools(*overrides: str) -> list[str]:
    """The tools a run of the shipped config knows (the keys of every row's tool_stats)."""
    from hermes_exp.settings.paths import config_dir, register_resolvers
    from hermes_exp.cli.listing import compose_settings
    from hermes_exp.tools.registry import Registry

    register_resolvers()
    return Registry.from_settings(compose_settings(config_dir(), list(overrides))).known_tools


def agent_bodies(path: Path) -> list[dict]:
    """Recorded chat request bodies that are agent turns (they carry `tools`); a tool's own model call
    (vision_analyze) and a summariser's are not agent turns, so not in a task's `api_calls`. A body torn
    by a kill (recorded as text) is none either."""
    if not path.exists():
        return []
    bodies = (json.loads(line)["body"] for line in path.read_text().splitlines())
    return [b for b in bodies if isinstance(b, dict) and "tools" in b]


def agent_request_count(path: Path) -> int:
    return len(agent_bodies(path))


def user_prompt(body: dict) -> str:
    """The task's prompt in an agent turn's body (its first user message)."""
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def request_count(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0
