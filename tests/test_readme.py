"""Every command of the README's ```bash blocks runs as written and exits 0 (README.md, "Development").

Rewrites, kept minimal and told in the README: `hermes-exp` / `hermes-exp-report` are this checkout's;
keys are dummies (`export` lines set theirs for the rest of their block); a command naming a real model
gets `model.base_url=<this test's mock server>` appended; a missing `dataset.path` is created from the
demo prompts (`qa.*`: question/answer columns instead of prompt). A command ending in `# needs: NAME` is
skipped with the reason for NAME, never silently.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from hermes_exp.mock.server import MockServer

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DEMO = REPO / "hermes_exp" / "data" / "demo_prompts.jsonl"
# What a test cannot have, by the name a README command gives after `# needs:`.
NEEDS = {
    "install": "creates a venv and installs the package: the test runs this checkout instead",
    "root": "installs system packages as root and runs the whole test suite, this test included",
    "docker-image": "pulls an image from a registry (no network in tests)",
    "gpu-server": "needs a model server on a GPU host",
    "network": "downloads from the internet",
}
KEYS = ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "BRAVE_API_KEY", "TAVILY_API_KEY", "GITHUB_TOKEN")
REAL_MODEL = re.compile(r"(?:^|\s)model=(?!mock(?:\s|$))[\w,]+")
NEEDS_MARK = re.compile(r"#\s*needs:\s*([\w-]+)\s*$")


@dataclass
class Command:
    line: int      # 1-based line of the README where it starts
    text: str      # continuation lines joined
    needs: str | None


def bash_blocks(text: str) -> list[list[Command]]:
    """The ```bash blocks of a markdown text, each a list of commands (`\\` continuations joined)."""
    blocks: list[list[Command]] = []
    current: list[Command] | None = None
    pending: tuple[int, str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if current is None:
            current = [] if line.strip() == "```bash" else None
            continue
        if line.strip() == "```":
            blocks.append(current)
            current = None
            continue
        start, joined = pending if pending else (number, "")
        if line.rstrip().endswith("\\"):
            pending = (start, joined + line.rstrip()[:-1] + " ")
            continue
        pending = None
        full = (joined + line).strip()
        if full and not full.startswith("#"):
            mark = NEEDS_MARK.search(full)
            current.append(Command(start, full, mark.group(1) if mark else None))
    return blocks


def _shims(bin_dir: Path) -> None:
    """`hermes-exp` and `hermes-exp-report` as this checkout's, whatever is installed on PATH."""
    bin_dir.mkdir()
    for name, module in (("hermes-exp", "hermes_exp"), ("hermes-exp-report", "hermes_exp.report.cli")):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m {module} "$@"\n')
        shim.chmod(0o755)
    (bin_dir / "sqlite-utils").symlink_to(Path(sys.executable).parent / "sqlite-utils")


def _dataset(path: Path) -> None:
    """The first demo prompts, in the format of the path's extension (`qa.*`: question/answer columns)."""
    rows = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines()[:3]]
    rows = [{"id": f"t{i}", "prompt": r["prompt"], "category": r["category"]} for i, r in enumerate(rows)]
    if path.stem == "qa":
        rows = [{"id": r["id"], "question": r["prompt"], "answer": "42"} for r in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    elif path.suffix == ".csv":
        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    elif path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        raise AssertionError(f"README dataset {path.name}: no fixture for this format")


def _prepare(command: Command, cwd: Path, base_url: str) -> str:
    """The command as the test runs it: missing datasets made, a real model pointed at the mock."""
    for found in re.finditer(r"dataset\.path=(\S+)", command.text):
        path = cwd / found.group(1)
        if not path.exists():
            _dataset(path)
    text = NEEDS_MARK.sub("", command.text).strip()
    code, _, _comment = text.partition(" # ")
    if REAL_MODEL.search(code) and code.split()[0] == "hermes-exp":
        code = f"{code.strip()} model.base_url={base_url}"
    return code.strip()


def _exports(text: str, env: dict[str, str]) -> None:
    """`export A=... B=...`: set for the rest of the block; `...` (a key to paste) becomes a dummy."""
    for word in shlex.split(text)[1:]:
        name, _, value = word.partition("=")
        env[name] = "dummy-key" if value in ("", "...") else value


CASES = []
for block in bash_blocks(README.read_text(encoding="utf-8")):
    runnable = [c for c in block if c.needs is None]
    if runnable:
        CASES.append(pytest.param(runnable, id=f"README.md:{block[0].line}"))
    for c in block:
        if c.needs is not None:
            CASES.append(pytest.param([c], id=f"README.md:{c.line}:needs-{c.needs}"))


def test_markers_are_known() -> None:
    """A `# needs:` marker names a reason this test knows: a made-up one would skip a command silently."""
    for block in bash_blocks(README.read_text(encoding="utf-8")):
        for c in block:
            assert c.needs is None or c.needs in NEEDS, f"README.md:{c.line}: unknown marker 'needs: {c.needs}'"


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("commands", CASES)
def test_readme_block(commands: list[Command], tmp_path: Path) -> None:
    if commands[0].needs is not None:
        pytest.skip(f"README.md:{commands[0].line} needs {commands[0].needs}: {NEEDS[commands[0].needs]}")
    _shims(tmp_path / "bin")
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, **{k: "dummy-key" for k in KEYS}, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    with MockServer() as server:
        for command in commands:
            if command.text.startswith("export "):
                _exports(command.text, env)
                continue
            code = _prepare(command, work, server.base_url)
            done = subprocess.run(["bash", "-c", code], cwd=work, env=env, capture_output=True, text=True,
                                  timeout=600)
            assert done.returncode == 0, (f"README.md:{command.line}: exit {done.returncode}\n$ {code}\n"
                                          f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
