"""Secrets stay secret: a provider error body that echoes the Authorization header (proxies and gateways
do) never reaches the ledger, an output file or stderr; with sandbox=local a tool command cannot read
the key from the runner through /proc/$PPID/environ, and the run warns that local cannot promise more."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import read_jsonl, run_cli, write_dataset
from test_providers import FAST_RETRY

from hermes_exp.mock_server import MockServer
from hermes_exp.redact import Redactor

KEY = "hx-fake-key-TOPSECRET-7f3a9c1e5b"  # made up; not shaped like a real provider key
ENV = {"OPENROUTER_API_KEY": KEY}
MARK = "[REDACTED:$OPENROUTER_API_KEY]"


def files_holding(root: Path, needle: str) -> list[Path]:
    """Every file under `root` (ledger, its WAL, exports, config snapshot) whose bytes contain `needle`."""
    return [p for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


@pytest.mark.parametrize("status", ["500", "401"])
def test_an_echoed_key_is_redacted_everywhere(tmp_path: Path, status: str) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"echo {i}"} for i in range(3)])
    faults = {"always": status, "echo_auth": True}
    with MockServer(faults=faults) as server:
        result = run_cli(tmp_path, "model=sonnet", "distribution=terminal_only",
                         f"model.base_url={server.base_url}", f"dataset.path={data}",
                         "run_name=echo", "num_workers=1", "resume.task_attempts=1", "model.retry.max_attempts=2",
                         *FAST_RETRY, env=ENV)
    assert result.returncode == (4 if status == "401" else 3), result.stderr
    assert KEY not in result.stderr and KEY not in result.stdout
    assert not files_holding(tmp_path / "outputs", KEY)
    with sqlite3.connect(tmp_path / "outputs" / "echo" / "ledger.db") as db:
        errors = [e for (e,) in db.execute("SELECT error FROM tasks WHERE state = 'error'")]
    assert errors and all(f"Authorization: Bearer {MARK}" in e for e in errors), errors
    if status == "401":
        assert f"HTTP 401" in result.stderr and MARK in result.stderr


@pytest.mark.parametrize("executor", ["threads", "processes"])
def test_local_commands_cannot_read_the_key_from_the_runner(tmp_path: Path, mock_server, executor: str) -> None:
    probe = "RUN: tr '\\0' '\\n' < /proc/$PPID/environ | grep -c OPENROUTER_API_KEY=; cat /proc/$PPID/environ"
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": probe}, {"prompt": probe + " "}])
    result = run_cli(tmp_path, "model=sonnet", "distribution=terminal_only",
                     f"model.base_url={mock_server.base_url}", f"dataset.path={data}",
                     "run_name=proc", "sandbox=local", "distribution=terminal_only", f"executor={executor}",
                     "num_workers=2", "filters=none", env=ENV, timeout=180)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("runs tool commands as host processes of your user") == 1
    rows = read_jsonl(tmp_path / "outputs" / "proc" / "trajectories.jsonl")
    text = json.dumps(rows)
    assert len(rows) == 2 and "OPENROUTER_API_KEY" in text  # the command really read the runner's environ
    assert KEY not in text and not files_holding(tmp_path / "outputs", KEY)


def test_auto_falling_back_to_local_warns_too(tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "RUN: echo hi"}])
    empty = tmp_path / "no-bwrap-here"
    empty.mkdir()
    result = run_cli(tmp_path, "model=sonnet", "distribution=terminal_only",
                     f"model.base_url={mock_server.base_url}", f"dataset.path={data}",
                     "run_name=auto", "sandbox=auto", env={**ENV, "PATH": str(empty)})
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("sandbox=auto runs tool commands as host processes") == 1


def test_no_warning_without_a_key(tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "RUN: echo hi"}])
    result = run_cli(tmp_path, f"model.base_url={mock_server.base_url}", f"dataset.path={data}", "run_name=nokey",
                     "sandbox=local")
    assert result.returncode == 0, result.stderr
    assert "host processes of your user" not in result.stderr


def test_redactor_forms_and_short_values() -> None:
    redact = Redactor({"K": 'ab"cd\\efgh', "SHORT": "abc"})
    assert redact('x ab"cd\\efgh y') == "x [REDACTED:$K] y"
    assert redact(json.dumps({"e": 'ab"cd\\efgh'})) == '{"e": "[REDACTED:$K]"}'
    assert redact("abc stays") == "abc stays" and not Redactor({})


def test_wiped_environ_block_still_reaches_child_processes(tmp_path: Path) -> None:
    script = ("import os, subprocess; from hermes_exp.redact import wipe_environ_block\n"
              "assert wipe_environ_block(['HX_SECRET'])\n"
              "print(b'HX_SECRET=s3cr3t-value' in open('/proc/self/environ', 'rb').read())\n"
              "print(subprocess.run(['sh', '-c', 'echo $HX_SECRET'], capture_output=True, text=True).stdout.strip())\n"
              "print(os.environ['HX_SECRET'])\n")
    out = subprocess.run([sys.executable, "-c", script], env={"HX_SECRET": "s3cr3t-value", "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "s3cr3t-value", "s3cr3t-value"]
