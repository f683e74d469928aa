"""`outputs.private=true`: every file of the run directory 0600 and every directory 0700 on disk, as Hermes
writes its outputs: the ledger (and its -wal/-shm), the exports, statistics.json, the report, the .hydra
snapshot, cli.log; a run made shared before is made private when it resumes with the flag. Real CLI runs."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from conftest import run_cli, write_dataset

ROWS = [{"prompt": "Look around the working folder", "verifier": "checks", "checks": {"tool_called": "terminal"}},
        {"prompt": "Take notes\nANSWER: 42", "verifier": "answer", "expected": "42"}]
COMMAND = ("run_name=priv", "sandbox=local", "distribution=terminal_only", "outputs.splits=true",
           "outputs.formats=[sharegpt,openai,atif]")


def _modes(root: Path) -> dict[str, int]:
    """path (relative to root, '.' for root) -> permission bits, for everything but symbolic links."""
    found = {".": stat.S_IMODE(root.stat().st_mode)}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            if not path.is_symlink():
                found[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def _report(run_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermes_exp.report.cli", str(run_dir)],
                          capture_output=True, text=True, timeout=120)


def test_a_private_run_writes_owner_only_files_and_directories(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "prompts.jsonl", ROWS)
    out = tmp_path / "outputs" / "priv"
    shared = run_cli(tmp_path, f"dataset.path={data}", *COMMAND)
    assert shared.returncode == 0, shared.stderr
    assert stat.S_IMODE((out / "trajectories.jsonl").stat().st_mode) == 0o644  # the default is unchanged
    assert stat.S_IMODE((out / ".hydra" / "config.yaml").stat().st_mode) == 0o644

    rows = [*ROWS, {"prompt": "Write a short note", "verifier": "checks", "checks": {"tool_called": "write_file"}}]
    write_dataset(data, rows)  # a new row: the private invocation runs it and writes every output again
    private = run_cli(tmp_path, f"dataset.path={data}", *COMMAND, "outputs.private=true")
    assert private.returncode == 0, private.stderr
    assert _report(out).returncode == 0
    exported = run_cli(tmp_path, f"dataset.path={data}", *COMMAND, "action=export", "filters=none")
    assert exported.returncode == 0, exported.stderr  # a later invocation without the flag keeps it private

    modes = _modes(out)
    for name in ("ledger.db", "trajectories.jsonl", "trajectories.openai.jsonl", "trajectories.atif.jsonl", "statistics.json",
                 "passed.jsonl", "failed.jsonl", "batch_0.jsonl", "report.html", "cli.log", ".hydra/config.yaml", ".lock"):
        assert name in modes, sorted(modes)
    assert {p: oct(m) for p, m in modes.items() if m != (0o700 if (out / p).is_dir() else 0o600)} == {}


def test_a_private_sweep_makes_its_sweep_directory_owner_only(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "prompts.jsonl", ROWS[:1])
    result = run_cli(tmp_path, "-m", f"dataset.path={data}", "run_name=psweep", "sandbox=local",
                     "distribution=terminal_only,minimal", "outputs.private=true")
    assert result.returncode == 0, result.stderr
    modes = _modes(tmp_path / "outputs" / "psweep")
    assert "multirun.yaml" in modes and "summary.json" in modes and "summary.csv" in modes, sorted(modes)
    assert {p: oct(m) for p, m in modes.items()
            if m != (0o700 if (tmp_path / "outputs" / "psweep" / p).is_dir() else 0o600)} == {}
