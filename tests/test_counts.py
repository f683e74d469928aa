"""Every number the CLI summary and statistics.json print equals what the files beside them hold, over
pairs of filters x selection x splits x samples x dataset selection x formats (and run vs export), and
each invocation's outputs follow its own filters, never an earlier invocation's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import REPO, read_jsonl, run_cli, write_dataset

pytestmark = pytest.mark.slow

ROWS = [json.loads(line) for line in (REPO / "hermes_exp" / "data" / "demo_prompts.jsonl").read_text().splitlines()
        if "browser" not in line]
SUMMARY = re.compile(r"(\d+) kept, (\d+) filtered.*?, (\d+) failed.*?, (\d+) pending of (\d+) (?:prompts|tasks)"
                     r"(?: \((\d+) prompts x (\d+) samples\))?")

# filters, selection, splits, samples_per_prompt, dataset.slice, formats, action: pairwise over the values
CASES = [
    ("verified", "best_of_n", True, 2, None, "[sharegpt]", "export"),
    ("none", "passed", False, 1, None, "[sharegpt,openai,atif]", "export"),
    ("strict", "all", True, 2, "0:5", "[sharegpt,openai,parquet]", "run"),
    ("default", "best_of_n", False, 1, "0:5", "[sharegpt]", "run"),
    ("verified", "all", False, 2, "0:5", "[sharegpt,parquet,atif]", "export"),
    ("default", "all", True, 2, None, "[sharegpt,openai]", "export"),
    ("none", "passed", True, 2, None, "[sharegpt,parquet]", "run"),
    ("default", "all", False, 2, None, "[sharegpt]", "run"),
]


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.is_file() else 0


def _check(run_dir: Path, stderr: str, case: tuple) -> None:
    filters, selection, splits, samples, sliced, formats, _ = case
    stats = json.loads((run_dir / "statistics.json").read_text())
    rows = read_jsonl(run_dir / "trajectories.jsonl")
    numbers = SUMMARY.search(stderr).groups()
    kept, filtered, failed, pending, total, prompts, per = (int(n) if n else None for n in numbers)
    assert (kept, filtered, failed, pending, total) == (stats["kept"], stats["filtered"], stats["failed"],
                                                         stats["pending"], stats["total_prompts"])
    assert total == samples * (5 if sliced else len(ROWS)) and kept + filtered + failed + pending == total
    assert (prompts, per) == ((None, None) if samples == 1 else (total // samples, samples))
    assert sum(stats["discarded"].values()) == filtered
    assert f"trajectories.jsonl ({len(rows)} lines)" in stderr.replace(str(run_dir) + "/", "")
    assert stats["exported"]["trajectories.jsonl"] == len(rows)
    assert sum(_lines(p) for p in run_dir.glob("batch_*.jsonl")) == len(rows)
    assert stats["selection"] == selection and f"selection {selection}" in stderr
    assert all(r["sample"] < samples for r in rows)
    if selection == "all":
        assert len(rows) == kept
    else:
        assert len(rows) <= kept and all(r["passed"] for r in rows)
    if selection == "best_of_n":
        assert len({r["prompt_index"] for r in rows}) == len(rows)
    if filters == "verified":
        assert all(r["passed"] for r in rows) and "Verified" in stats["filters"]
    if filters == "none":
        assert filtered == 0 and stats["filters"] == []
    for name, want in (("passed.jsonl", True), ("failed.jsonl", False)):
        assert (run_dir / name).is_file() == splits
        if splits:
            split = read_jsonl(run_dir / name)
            assert stats["exported"][name] == len(split) and all(r["passed"] is want for r in split)
            assert f"{name}: {len(split)}" in stderr
    assert (run_dir / "trajectories.openai.jsonl").is_file() == ("openai" in formats)
    if "openai" in formats:
        assert _lines(run_dir / "trajectories.openai.jsonl") == len(rows)
    assert (run_dir / "trajectories.atif.jsonl").is_file() == ("atif" in formats)
    if "atif" in formats:  # one ATIF trajectory per kept sample, in the same order
        assert [t["extra"]["prompt_index"] for t in read_jsonl(run_dir / "trajectories.atif.jsonl")] == [
            r["prompt_index"] for r in rows]
    assert (run_dir / "trajectories.parquet").is_file() == ("parquet" in formats)
    if "parquet" in formats:
        import pyarrow.parquet as pq

        assert pq.read_metadata(run_dir / "trajectories.parquet").num_rows == len(rows)


def test_counts_match_the_files(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "prompts.jsonl", ROWS)
    base = ("run_name=c", f"dataset.path={data}", "distribution=terminal_only")
    first = run_cli(tmp_path, *base, "samples_per_prompt=2")
    assert first.returncode == 0, first.stderr
    for case in CASES:
        filters, selection, splits, samples, sliced, formats, action = case
        args = [*base, f"filters={filters}", f"selection={selection}", f"outputs.splits={str(splits).lower()}",
                f"samples_per_prompt={samples}", f"outputs.formats={formats}", f"action={action}"]
        if sliced:
            args.append(f"dataset.slice={sliced}")
        done = run_cli(tmp_path, *args)
        assert done.returncode == 0, (case, done.stderr)
        assert "model calls" in done.stderr and "planned now" in done.stderr
        _check(tmp_path / "outputs" / "c", done.stderr, case)
        assert "rows edited or removed" not in done.stderr  # a narrower slice removes no row


def test_filters_follow_the_invocation_not_an_earlier_export(tmp_path: Path) -> None:
    """A run with new filters re-applies them (no model call); a plain run after an export with other
    filters uses its own configured filters again."""
    data = write_dataset(tmp_path / "prompts.jsonl", ROWS)
    base = ("run_name=f", f"dataset.path={data}", "distribution=terminal_only")
    assert run_cli(tmp_path, *base).returncode == 0
    plain = json.loads((tmp_path / "outputs" / "f" / "statistics.json").read_text())
    strict = run_cli(tmp_path, *base, "filters=verified")
    assert strict.returncode == 0, strict.stderr
    after = json.loads((tmp_path / "outputs" / "f" / "statistics.json").read_text())
    assert after["kept"] < plain["kept"] and after["api_calls"] == plain["api_calls"]  # no model call
    assert "re-applied filters" in strict.stderr and "Verified" in strict.stderr
    assert run_cli(tmp_path, *base, "action=export", "filters=verified").returncode == 0
    again = run_cli(tmp_path, *base)
    assert again.returncode == 0, again.stderr
    final = json.loads((tmp_path / "outputs" / "f" / "statistics.json").read_text())
    assert (final["kept"], final["filtered"]) == (plain["kept"], plain["filtered"])
    assert _lines(tmp_path / "outputs" / "f" / "trajectories.jsonl") == plain["kept"]


def test_an_export_whose_dataset_is_gone_covers_the_last_runs_tasks(tmp_path: Path) -> None:
    """An export scans its own dataset selection; a dataset moved away since the run is said, not fatal."""
    data = write_dataset(tmp_path / "prompts.jsonl", ROWS[:3])
    base = ("run_name=g", f"dataset.path={data}", "distribution=terminal_only")
    assert run_cli(tmp_path, *base).returncode == 0
    sliced = run_cli(tmp_path, *base, "dataset.slice=0:1", "action=export")
    assert sliced.returncode == 0, sliced.stderr
    assert "2 task(s) in the ledger are outside this invocation's dataset selection" in sliced.stderr
    assert _lines(tmp_path / "outputs" / "g" / "trajectories.jsonl") == 1
    data.rename(tmp_path / "moved.jsonl")
    moved = run_cli(tmp_path, *base, "action=export")
    assert moved.returncode == 0, moved.stderr
    assert "cannot be read" in moved.stderr and "1 kept" in moved.stderr
