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

from hermes_exp.mock.server import MockServer
from hermes_exp.settings.redact import Redactor

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
    script = ("import os, subprocess; from hermes_exp.settings.redact import wipe_environ_block\n"
              "assert wipe_environ_block(['HX_SECRET'])\n"
              "print(b'HX_SECRET=s3cr3t-value' in open('/proc/self/environ', 'rb').read())\n"
              "print(subprocess.run(['sh', '-c', 'echo $HX_SECRET'], capture_output=True, text=True).stdout.strip())\n"
              "print(os.environ['HX_SECRET'])\n")
    out = subprocess.run([sys.executable, "-c", script], env={"HX_SECRET": "s3cr3t-value", "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "s3cr3t-value", "s3cr3t-value"]


LITERAL = "sk-proj-" + "hxFAKEliteral0123456789abcdef"  # shaped like an OpenAI key (made up; split: no key-shaped literal in the repo)


@pytest.mark.parametrize("override, says", [
    (f"+model.api_key={LITERAL}", "model.api_key holds what looks like an API key"),
    ("+model.api_key=plainword", "model.api_key holds a secret as a config value"),
    (f"provider.api_key_env={LITERAL}", "provider.api_key_env holds what looks like an API key"),
    ("provider.api_key_env=my-key-value", "provider.api_key_env must be the NAME of an environment variable"),
    (f"+mcp.servers.gh.env.GITHUB_TOKEN=ghp_{'a1' * 18}", "mcp.servers.gh.env.GITHUB_TOKEN holds what looks like"),
    ("+mcp.servers.gh.headers_env.Authorization='Bearer abcdefghijklmnopqrstu'", "holds what looks like an API key"),
    (f"'+provider.headers={{Authorization: Bearer {LITERAL}}}'".strip("'"), "provider.headers.Authorization holds"),
    (f"+hydra.job.env_set.OPENAI_API_KEY={LITERAL}", "hydra.job.env_set.OPENAI_API_KEY holds what looks like"),
    (f"+model.api_key=a,{LITERAL}", "model.api_key holds"),  # a sweep's values, each
])
def test_a_secret_given_as_a_value_is_refused_and_never_shown(override: str, says: str) -> None:
    from hermes_exp.errors import ConfigError
    from hermes_exp.settings.secrets import check_overrides

    with pytest.raises(ConfigError) as err:
        check_overrides(["-m", override])
    assert says in err.value.message and "not shown" in err.value.message and "api_key_env" in err.value.hint
    secret = override.split("=", 1)[1]
    assert not any(part in str(err.value) for part in (LITERAL, "plainword", "my-key-value", "ghp_", "abcdefghijkl"))
    assert secret not in str(err.value)


@pytest.mark.parametrize("override", [
    "provider.api_key_env=OPENAI_API_KEY", "+mcp.servers.gh.env.GITHUB_PERSONAL_ACCESS_TOKEN=GITHUB_TOKEN",
    f"dataset.path=/data/{LITERAL}/rows.jsonl", f"+sandbox.env.HF_TOKEN=hf_{'x' * 34}",  # literal by design
    "model.name=openai/gpt-4o", "~model.pricing", "model=sonnet,gpt4o", "max_turns=5",
])
def test_names_paths_and_ordinary_values_pass(override: str) -> None:
    from hermes_exp.settings.secrets import check_overrides

    check_overrides([override])


def test_a_key_on_the_command_line_is_never_saved_even_by_a_sweep(tmp_path: Path) -> None:
    """Hydra names a sweep's job directories after the overrides and writes multirun.yaml before any job
    runs: the command line is checked before Hydra starts. Nothing is written, exit 2."""
    for args in ([f"+model.api_key={LITERAL}"], ["-m", f"+model.api_key={LITERAL}", "seed=0,1"]):
        result = run_cli(tmp_path, "run_name=sk", *args)
        assert result.returncode == 2 and "model.api_key holds" in result.stderr, result.stderr
        assert LITERAL not in result.stderr + result.stdout
    assert files_holding(tmp_path, LITERAL) == [] and not (tmp_path / "outputs").exists()
    assert not (tmp_path / "multirun").exists()


@pytest.mark.parametrize("sweep", [False, True])
def test_a_key_in_a_config_file_is_refused_before_the_run_saves_anything(tmp_path: Path, sweep: bool) -> None:
    """In a single run, at the start of the run; in a sweep, before Hydra's sweeper saves multirun.yaml."""
    configs = tmp_path / "myconf" / "secrets"
    configs.mkdir(parents=True)
    (configs / "mine.yaml").write_text(f"# @package _global_\nprovider:\n  headers:\n    Authorization: Bearer {LITERAL}\n")
    args = ["run_name=skf", f"hydra.searchpath=[file://{tmp_path / 'myconf'}]", "+secrets=mine"]
    result = run_cli(tmp_path, *(["-m", *args, "seed=0,1"] if sweep else args))
    assert result.returncode == 2 and "provider.headers.Authorization holds" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and LITERAL not in result.stderr
    run_dir = tmp_path / "outputs" / "skf"
    assert not (run_dir / "ledger.db").exists() and not (run_dir / ".hydra").exists()
    assert not (run_dir / "multirun.yaml").exists()
    assert not (tmp_path / "outputs").exists() or files_holding(tmp_path / "outputs", LITERAL) == []
