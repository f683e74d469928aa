"""dataset.shard=I/N and action=merge: shards of one run, each in its own run directory, joined into one
set of outputs equal to the unsharded run's (real CLI runs, a real mock server, a real verifier)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import read_jsonl, run_cli, write_dataset

ROWS = [{"prompt": f"WRITE: answer.txt 42\nTask {i}", "verify": "grep -qx 42 answer.txt"} for i in range(9)]
ROWS.append(dict(ROWS[3]))  # a duplicate row: its occurrence number keys it apart, in whichever shard
VARYING = ("timestamp", "batch_num")  # when and in which batch file a sample was written: not what it is


def _same(trajectory: dict) -> dict:
    meta = {k: v for k, v in trajectory["metadata"].items() if k not in VARYING}
    return {**trajectory, "metadata": meta}


def _outputs(run_dir: Path) -> tuple[list[dict], dict]:
    rows = sorted((_same(t) for t in read_jsonl(run_dir / "trajectories.jsonl")),
                  key=lambda t: (t["prompt_index"], t["sample"]))
    return rows, json.loads((run_dir / "statistics.json").read_text())


@pytest.mark.slow
def test_two_shards_merged_equal_the_unsharded_run(tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "p.jsonl", ROWS)
    args = [f"dataset.path={data}", "verifier=command", "sandbox=local", "filters=none", "distribution=balanced",
            "samples_per_prompt=2", f"model.base_url={mock_server.base_url}"]
    assert run_cli(tmp_path, *args, "run_name=whole").returncode == 0
    for i in (0, 1):
        part = run_cli(tmp_path, *args, f"run_name=part_{i}", f"dataset.shard={i}/2")
        assert part.returncode == 0, part.stderr
    out = tmp_path / "outputs"
    parts = [{t["prompt_index"] for t in read_jsonl(out / f"part_{i}" / "trajectories.jsonl")} for i in (0, 1)]
    assert parts[0] and parts[1] and not parts[0] & parts[1] and parts[0] | parts[1] == set(range(len(ROWS)))

    merged = run_cli(tmp_path, *args, "action=merge", "merge.shards=outputs/part_*", "run_name=all")
    assert merged.returncode == 0, merged.stderr
    assert f"merged {2 * len(ROWS)} task(s) of 2 shard(s)" in merged.stderr
    whole, together = _outputs(out / "whole"), _outputs(out / "all")
    assert together[0] == whole[0]  # the same trajectories, apart from when they were written
    passed = whole[1]["verification"]
    assert 0 < passed["passed"] < 2 * len(ROWS)  # the toolset draw makes some samples fail: pass@k means something
    assert together[1]["verification"]["pass_at_k"] == passed["pass_at_k"]
    assert together[1]["kept"] == whole[1]["kept"] == 2 * len(ROWS) and together[1]["pending"] == 0
    assert (out / "all" / "report.html").is_file()

    # Rows appended to the dataset: every row keeps its shard, so each shard only runs its new rows.
    write_dataset(data, ROWS + [{"prompt": f"WRITE: answer.txt 42\nLate {i}", "verify": "true"} for i in range(4)])
    grown = [run_cli(tmp_path, *args, f"run_name=part_{i}", f"dataset.shard={i}/2") for i in (0, 1)]
    planned = [int(g.stderr.split(" planned now")[0].rsplit("(", 1)[1]) for g in grown]
    assert sum(planned) == 2 * 4 and all("outside this invocation" not in g.stderr for g in grown)

    # A shard of another experiment is refused, naming it and what differs.
    other = run_cli(tmp_path, *args, "run_name=part_x", "dataset.shard=0/2", "max_turns=3")
    assert other.returncode == 0, other.stderr
    refused = run_cli(tmp_path, *args, "action=merge", "merge.shards=outputs/part_*", "run_name=all")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "1 of 3 shard(s) ran another experiment" in refused.stderr and "part_x" in refused.stderr
    assert "max_turns (3 -> 10)" in refused.stderr


@pytest.mark.slow
def test_bad_shard_specs_and_merges_are_refused(tmp_path: Path, mock_server) -> None:
    for spec in ("2/2", "a/3", "1"):
        bad = run_cli(tmp_path, f"dataset.shard={spec}", "run_name=bad")
        assert bad.returncode == 2 and f"dataset.shard='{spec}' is not I/N with 0 <= I < N" in bad.stderr, bad.stderr
    none = run_cli(tmp_path, "action=merge", "run_name=m")
    assert none.returncode == 2 and "action=merge needs merge.shards" in none.stderr
    empty = run_cli(tmp_path, "action=merge", "merge.shards=outputs/nothing_*", "run_name=m")
    assert empty.returncode == 2 and "'outputs/nothing_*' matches no directory" in empty.stderr
    small = [f"dataset.path={write_dataset(tmp_path / 'p.jsonl', ROWS[:2])}", "sandbox=local",
             "distribution=terminal_only", f"model.base_url={mock_server.base_url}"]
    assert run_cli(tmp_path, *small, "run_name=ran").returncode == 0
    assert run_cli(tmp_path, *small, "run_name=ran2").returncode == 0
    over = run_cli(tmp_path, *small, "action=merge", "merge.shards=[outputs/ran]", "run_name=ran2")
    assert over.returncode == 2 and "holds a run of its own, not a merge of shards" in over.stderr
