"""`verifier=command`: after the agent's last turn, copy the row's `tests` into the same sandbox (only
now, so the agent never saw them) and run the row's `verify` command there.

The reward follows Harbor's convention: exit status 0 -> 1.0, else 0.0, unless the command writes a
number (`reward.txt`) or a JSON object (`reward.json`: its "reward", else the mean of its named rewards) to the reward
directory: `logs/verifier/` relative to the working directory on local/bwrap, `/logs/verifier/` in a container.
Whatever the agent left there is removed first.

Row fields (the API a dataset adapter, e.g. Harbor task folders, builds on):
  verify: str                       the shell command, run in the working directory (required)
  tests:  {path: content} | folder  a map is written relative to the working directory; a folder
                                    (absolute, or relative to the dataset file) is copied to
                                    `<tests_dir>/` (default `tests/`), keeping file modes
A Harbor task (hermes_exp/dataset/readers/harbor.py) maps onto this with a row-level verifier
{"kind": "command", "tests_dir": "/tests", "require_reward_file": true}: an absolute tests_dir is a
container path (sandbox=docker only), and without a reward file the verification fails, as in Harbor.
Within one verification the order is: tests copied in, reward dir cleared, `verify` run (one exec),
reward read.
"""

from __future__ import annotations

import json
import math
import shlex
import uuid
from typing import Any

from hermes_exp.errors import HermesExpError
from hermes_exp.sandbox.base import Sandbox
from hermes_exp.verify.base import DETAILS_CHARS, Verdict, VerifierFailed, VerifyContext
from hermes_exp.verify.explain import explaining
from hermes_exp.sandbox.files import put_files
from hermes_exp.verify.suspect import rules

# One exec per verification (each exec costs a process spawn, or a `docker exec` round trip): clear the
# reward directory, run `verify` in its own shell, then print its exit status and the reward file after
# a marker with a fresh nonce, so nothing the command prints can pass for them.
_SCRIPT = ('{prep} || {{ echo; echo "{m} prep"; exit 0; }}\n'
           'sh -c {cmd}\n'
           'code=$?\n'
           'echo; echo "{m} exit $code"\n'
           'if [ -f {d}/reward.json ]; then echo "{m} json"; cat {d}/reward.json; '
           'elif [ -f {d}/reward.txt ]; then echo "{m} txt"; cat {d}/reward.txt; else echo "{m} none"; fi\n')


class CommandVerifier:
    """Runs `verify` in the sample's sandbox; `timeout_seconds` bounds it (a timeout is a verifier error)."""

    needs_sandbox = True

    def __init__(self, timeout_seconds: float = 120, tests_dir: str = "tests", reward_dir: str = "logs/verifier",
                 container_reward_dir: str = "/logs/verifier", pass_threshold: float = 1.0,
                 require_reward_file: bool = False, infra_patterns: list[str] | None = None,
                 infra_exit_codes: list[int] | None = None, user: str | None = None,
                 context: VerifyContext | None = None, **_: Any) -> None:
        self.timeout = float(timeout_seconds)
        self.tests_dir = str(tests_dir)
        self.context = context or VerifyContext()
        self.reward_dir = str(container_reward_dir if self.context.in_container else reward_dir)
        self.pass_threshold = float(pass_threshold)
        self.require_reward_file = bool(require_reward_file)  # Harbor: no reward file is a verifier error
        self.infra = rules(infra_patterns, infra_exit_codes)  # verifier_suspect (verify/suspect.py)
        self.user = str(user) if user not in (None, "") else None  # Harbor's [verifier].user; None: the image's

    def row_problem(self, row: dict[str, Any]) -> str | None:
        command = row.get("verify")
        if not isinstance(command, str) or not command.strip():
            return "verifier=command needs the row's \"verify\" command (and usually its \"tests\")"
        return None

    def verify(self, sandbox: Sandbox | None, row: dict[str, Any], result: dict[str, Any]) -> Verdict:
        command = row.get("verify")
        if sandbox is None:
            raise VerifierFailed("verifier=command needs the sample's sandbox (re-score with verifier.keep_workdir=true)")
        if not isinstance(command, str) or not command.strip():
            raise VerifierFailed("the row has no `verify` command for verifier=command; add \"verify\": \"...\" "
                                 "(and its \"tests\") to the row, or choose another verifier")
        marker = f"@@hx-{uuid.uuid4().hex}"
        reward_dir = shlex.quote(self.reward_dir)
        prep = f"rm -rf {reward_dir} && mkdir -p {reward_dir}" if self.user is None else f"test -w {reward_dir}"
        script = _SCRIPT.format(d=reward_dir, m=marker, cmd=shlex.quote(command), prep=prep)
        try:
            tests = row.get("tests")
            put_files(sandbox, tests, self.context.base_dir, self.tests_dir if isinstance(tests, str) else "", "tests")
            run = self._run(sandbox, script, isinstance(tests, str))
        except HermesExpError as exc:  # the sandbox broke, or the tests could not be copied in
            raise VerifierFailed(f"{type(exc).__name__}: {exc}") from exc
        output, exit_code, kind, text = _parse(run.output, marker, self.reward_dir)
        if run.timed_out:
            raise VerifierFailed(f"the verify command timed out after {self.timeout:g}s "
                                 f"(verifier.timeout_seconds): {explaining(output, 500)}")
        if exit_code is None:
            raise VerifierFailed(f"the verify command's exit status could not be read: {explaining(output, 500)}")
        if kind == "none" and self.require_reward_file:
            raise VerifierFailed(f"the verify command (exit {exit_code}) wrote no {self.reward_dir}/reward.txt or "
                                 f"reward.json, which this task's verifier must write: {explaining(output, 500)}")
        reward = _reward(kind, text, exit_code)
        named = f" of reward.json {' '.join(text.split())[:300]}" if kind == "json" else ""
        head = f"exit {exit_code}; reward {reward:g}{named}\n"
        return Verdict(reward, head + explaining(output, max(500, DETAILS_CHARS - len(head))), output=output,
                       suspect=self.infra.reason(output, exit_code))


    def _run(self, sandbox: Sandbox, script: str, tests_folder: bool) -> Any:
        """The script as the verifier's user when one is set (a container only): the reward directory
        and the tests are made that user's first, as root. Else as the sandbox runs commands."""
        exec_as = getattr(sandbox, "exec_as", None)
        if self.user is None:
            return exec_as("", script, self.timeout) if exec_as else sandbox.exec(script, timeout=self.timeout)
        if exec_as is None:
            raise VerifierFailed(f"the verifier's user {self.user!r} ([verifier].user) needs sandbox=docker")
        d = shlex.quote(self.reward_dir)
        mine = f"{d} {shlex.quote(self.tests_dir)}" if tests_folder and self.tests_dir.startswith("/") else d
        prep = exec_as("0", f"rm -rf {d} && mkdir -p {d} && chown -R {shlex.quote(self.user)} {mine}", 60.0)
        if prep.exit_code != 0:
            raise VerifierFailed(f"cannot prepare {self.reward_dir} for the verifier's user {self.user!r}: "
                                 f"{prep.output.strip()[:300]}")
        return exec_as(self.user, script, self.timeout)


def _parse(output: str, marker: str, reward_dir: str) -> tuple[str, int | None, str, str]:
    """(the command's output, its exit status or None, reward kind json/txt/none, reward file text)."""
    head, found, tail = output.rpartition(f"\n{marker} exit ")
    if not found:
        if f"{marker} prep" in output:
            raise VerifierFailed(f"cannot prepare the reward directory {reward_dir}: {output.strip()[:300]}")
        return output, None, "none", ""  # cut short (a timeout): the caller reports it
    status, _, rest = tail.partition("\n")
    kind_line, _, text = rest.partition("\n")
    code = int(status.strip()) if status.strip().lstrip("-").isdigit() else None
    return head.rstrip("\n"), code, kind_line.removeprefix(f"{marker} ").strip(), text


def _reward(kind: str, text: str, exit_code: int) -> float:
    """From reward.json, reward.txt, or (none) the exit status."""
    if kind == "none":
        return 1.0 if exit_code == 0 else 0.0
    try:
        value: Any = json.loads(text) if kind == "json" else float(text.strip())
    except ValueError as exc:
        raise VerifierFailed(f"the verify command wrote an unreadable reward.{kind}: {text.strip()[:200]!r}") from exc
    if isinstance(value, dict):
        value = _from_object(value, text)
    if not _number(value):
        raise VerifierFailed(f"the reward file holds {text.strip()[:200]!r}, not a number or a JSON object of "
                             "named numbers ({\"reward\": <number>} or {\"<name>\": <number>, ...})")
    return float(value)


def _number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def _from_object(value: dict[str, Any], text: str) -> Any:
    """A reward.json object: its "reward" when it has one, else the mean of its named rewards (Harbor's
    multi-reward recipe writes {"correctness": 1, "performance": 0.5}); every one is kept in the details."""
    if "reward" in value:
        return value["reward"]
    if not value or not all(_number(v) for v in value.values()):
        raise VerifierFailed(f"reward.json holds {text.strip()[:200]!r}: its named rewards must all be numbers")
    return sum(float(v) for v in value.values()) / len(value)
