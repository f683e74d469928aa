"""The incremental export (store/export_reuse.py): a resume, a rescore, a re-run, filters, splits, a
selection and a dataset slice export only the tasks that changed, and every output is byte for byte what
a full export of the same ledger writes; outputs edited, truncated or left by an export whose index was
not written make the export render everything (real CLI, real mock server, real SQLite)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from conftest import run_cli, write_dataset

pytest.importorskip("pyarrow")
pytestmark = pytest.mark.slow  # a dozen CLI invocations and full reference exports each

OUTPUTS = ("trajectories.jsonl", "trajectories.openai.jsonl", "trajectories.atif.jsonl", "trajectories.parquet",
           "statistics.json", "passed.jsonl", "failed.jsonl")


def _rows(start: int, stop: int) -> list[dict]:
    # the mock follows RUN: and ANSWER: lines; `expected` 1 passes one task in three
    return [{"prompt": f"RUN: echo {i}\nANSWER: {i % 3}\nTask {i}", "expected": "1", "topic": f"t{i % 2}"}
            for i in range(start, stop)]


def _outputs(run_dir: Path) -> dict[str, bytes]:
    names = [n for n in OUTPUTS if (run_dir / n).exists()] + sorted(p.name for p in run_dir.glob("batch_*.jsonl"))
    return {name: (run_dir / name).read_bytes() for name in names}


def _full(tmp: Path, run_dir: Path, args: list[str]) -> dict[str, bytes]:
    """What a full export of this very ledger writes: a copy of the run without outputs nor index, exported."""
    ref = tmp / "full"
    shutil.rmtree(ref, ignore_errors=True)
    shutil.copytree(run_dir, ref / "outputs" / run_dir.name)
    for name in _outputs(ref / "outputs" / run_dir.name):
        (ref / "outputs" / run_dir.name / name).unlink()
    (ref / "outputs" / run_dir.name / ".export-index").unlink()
    done = run_cli(ref, *args, "action=export")
    assert done.returncode == 0, done.stderr
    assert "export: every line rendered" not in done.stderr and "copied from the last export" not in done.stderr
    return _outputs(ref / "outputs" / run_dir.name)


def _same_as_full(tmp: Path, run_dir: Path, args: list[str]) -> None:
    mine, full = _outputs(run_dir), _full(tmp, run_dir, args)
    assert mine.keys() == full.keys()
    for name in full:
        assert mine[name] == full[name], name


def _run(tmp: Path, *args: str, rendered: str | None) -> str:
    """One invocation; `rendered`: "N of M" tasks it must have rendered (None: all, the index unusable)."""
    done = run_cli(tmp, *args)
    assert done.returncode == 0, done.stderr
    if rendered is None:
        assert "export: every line rendered" in done.stderr, done.stderr
    else:
        assert f"export: {rendered} task(s) rendered, the others' lines copied" in done.stderr, done.stderr
    return done.stderr


def _set(run_dir: Path, sql: str, *params: object) -> None:
    with sqlite3.connect(run_dir / "ledger.db") as db:
        db.execute(sql, params)


@pytest.fixture
def run(tmp_path: Path, mock_server):
    data = tmp_path / "p.jsonl"
    write_dataset(data, _rows(0, 10))
    args = [f"dataset.path={data}", "run_name=r", "sandbox=local", "filters=none", "verifier=answer",
            "batch_size=3", "outputs.formats=[sharegpt,openai,parquet,atif]", f"model.base_url={mock_server.base_url}"]
    first = run_cli(tmp_path, *args)
    assert first.returncode == 0, first.stderr
    return data, args, tmp_path / "outputs" / "r"


def test_resume_rescore_rerun_and_filters_export_only_what_changed(tmp_path: Path, run) -> None:
    data, args, out = run
    write_dataset(data, _rows(0, 13))
    _run(tmp_path, *args, rendered="3 of 13")  # three new rows, in a new batch
    _same_as_full(tmp_path, out, args)

    # a rescore of two samples (the scores table changes, nothing else): their lines change
    with sqlite3.connect(out / "ledger.db") as db:
        keys = [k for (k,) in db.execute("SELECT key FROM tasks ORDER BY prompt_index LIMIT 2")]
        db.execute("UPDATE scores SET reward = 1 - reward, passed = 1 - passed, scored_at = ? WHERE key IN (?, ?)",
                   [time.time(), *keys])
    _run(tmp_path, *args, "action=export", rendered="2 of 13")
    _same_as_full(tmp_path, out, args)

    # a task re-run with another outcome (it had failed): it is recorded again, in a new batch
    _set(out, "UPDATE tasks SET state = 'error', error_class = 'provider', updated_at = ? WHERE prompt_index = 4",
         time.time())
    _run(tmp_path, *args, rendered="1 of 13")
    _same_as_full(tmp_path, out, args)

    # filters=verified: the failing samples are filtered, their lines leave every output
    filtered = args + ["filters=verified"]
    _run(tmp_path, *filtered, "action=export", rendered="9 of 13")
    _same_as_full(tmp_path, out, filtered)


def test_splits_selection_and_slice_changes_stay_exact(tmp_path: Path, run) -> None:
    data, args, out = run
    split = args + ["outputs.splits=true"]
    _run(tmp_path, *split, "action=export", rendered=None)  # another setting: every line rendered
    _same_as_full(tmp_path, out, split)
    write_dataset(data, _rows(0, 12))
    _run(tmp_path, *split, rendered="2 of 12")
    _same_as_full(tmp_path, out, split)

    best = split + ["selection=passed"]  # kept: only the passing; the others' lines are in failed.jsonl
    _run(tmp_path, *best, "action=export", rendered=None)
    _same_as_full(tmp_path, out, best)
    write_dataset(data, _rows(0, 14))
    _run(tmp_path, *best, rendered="2 of 14")
    _same_as_full(tmp_path, out, best)

    off = args + ["selection=best_of_n"]  # splits off again, best_of_n ranks every sample
    _run(tmp_path, *off, "action=export", rendered=None)
    _same_as_full(tmp_path, out, off)
    assert not (out / "passed.jsonl").exists()
    write_dataset(data, _rows(0, 15))
    _run(tmp_path, *off, rendered="1 of 15")
    _same_as_full(tmp_path, out, off)

    sliced = off + ["dataset.slice=0:9"]  # six tasks leave the outputs (the ledger keeps them)
    _run(tmp_path, *sliced, "outputs.allow_shrink=true", rendered="0 of 9")
    _same_as_full(tmp_path, out, sliced)


def _edit_in_place(path: Path, old: bytes, new: bytes) -> None:
    """Change bytes of a file keeping its size and modification time (what a size+mtime check misses)."""
    st = os.stat(path)
    data = path.read_bytes()
    assert len(old) == len(new) and data.count(old) >= 1
    path.write_bytes(data.replace(old, new, 1))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_size == st.st_size and os.stat(path).st_mtime_ns == st.st_mtime_ns


def test_outputs_not_the_ones_the_index_describes_are_rendered_again(tmp_path: Path, run) -> None:
    data, args, out = run
    _edit_in_place(out / "trajectories.jsonl", b"\"sample\": 0", b"\"sample\": 9")
    write_dataset(data, _rows(0, 11))
    _run(tmp_path, *args, rendered=None)
    _same_as_full(tmp_path, out, args)

    with (out / "trajectories.jsonl").open("r+b") as fh:  # truncated by hand
        fh.truncate(os.stat(out / "trajectories.jsonl").st_size // 2)
    write_dataset(data, _rows(0, 12))
    _run(tmp_path, *args, rendered=None)
    _same_as_full(tmp_path, out, args)

    # an export killed after renaming its outputs, before its index: the older index is left
    older = (out / ".export-index").read_bytes()
    write_dataset(data, _rows(0, 13))
    _run(tmp_path, *args, rendered="1 of 13")
    (out / ".export-index").write_bytes(older)
    write_dataset(data, _rows(0, 14))
    _run(tmp_path, *args, rendered=None)
    _same_as_full(tmp_path, out, args)

    # a batch file edited: rewritten, though all its lines are copied
    _edit_in_place(out / "batch_0.jsonl", b"\"sample\": 0", b"\"sample\": 9")
    write_dataset(data, _rows(0, 15))
    _run(tmp_path, *args, rendered="1 of 15")
    _same_as_full(tmp_path, out, args)
