"""The scan cache serves an unchanged dataset file's keys and never a changed file's: real files, real
timestamps, the real CLI against the mock model."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace
from pathlib import Path

from conftest import run_cli, write_dataset

from hermes_exp.dataset.tasks import open_dataset
from hermes_exp.run.scan_cache import NAME, ScanCache, cache_key
from hermes_exp.dataset.selection import Selection, from_settings, scan_selected

SETTINGS = {"dataset": {"path": "x"}, "model": {"name": "m"}}


def _age(path: Path, seconds: float) -> None:
    """Set the file's mtime `seconds` in the past (an edit long before the scan: not racy)."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def aged_run(tmp_path: Path, base_url: str, run_name: str) -> tuple[list[dict], Path, list[str]]:
    """Four rows in a dataset file last written a minute ago (older than the 2 s racily-clean rule),
    and the CLI arguments of a run over it."""
    rows = [{"prompt": f"Say hello number {i}"} for i in range(4)]
    data = write_dataset(tmp_path / "p.jsonl", rows)
    _age(data, 60)
    args = [f"dataset.path={data}", f"run_name={run_name}", f"model.base_url={base_url}",
            "distribution=terminal_only", f"sandbox.root={tmp_path / 'sb'}"]
    return rows, data, args


def _scan_and_save(run_dir: Path, data: Path, settings: dict = SETTINGS) -> tuple[list, ScanCache]:
    source = open_dataset(data)
    cache = ScanCache(run_dir, source, cache_key(settings, Selection()))
    found = scan_selected(source, Selection(), "id", False, extra_check=cache.watching(None))
    cache.save(found)
    return found.indexed, cache


def _load(run_dir: Path, data: Path, settings: dict = SETTINGS):
    return ScanCache(run_dir, open_dataset(data), cache_key(settings, Selection())).load()


def test_an_unchanged_file_is_served_from_the_cache(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"task {i}"} for i in range(5)] + [{"prompt": "task 0"}])
    _age(data, 60)
    indexed, _ = _scan_and_save(tmp_path, data)
    cached = _load(tmp_path, data)
    assert cached is not None and cached.spool is None
    assert cached.indexed == indexed  # duplicates keep their occurrence numbers
    assert _load(tmp_path, data, {**SETTINGS, "samples_per_prompt": 2}) is None  # other settings: scanned again


def test_a_same_size_edit_with_another_mtime_is_rescanned(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "task A"}, {"prompt": "task B"}])
    _age(data, 60)
    indexed, _ = _scan_and_save(tmp_path, data)
    size = data.stat().st_size
    write_dataset(data, [{"prompt": "task A"}, {"prompt": "task C"}])
    assert data.stat().st_size == size
    _age(data, 30)
    assert _load(tmp_path, data) is None
    rescanned, _ = _scan_and_save(tmp_path, data)
    assert rescanned[0] == indexed[0] and rescanned[1].key != indexed[1].key


def test_a_file_written_just_before_the_scan_is_not_trusted(tmp_path: Path) -> None:
    """Racily clean: a same-size write within the same timestamp tick would keep the signature."""
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "task A"}])
    _scan_and_save(tmp_path, data)
    assert (tmp_path / NAME).is_file()
    assert _load(tmp_path, data) is None


def test_scans_that_cannot_be_replayed_are_not_kept(tmp_path: Path) -> None:
    """Skipped invalid rows (their warning must be printed again) and rows naming folders (which may
    disappear) are scanned every time."""
    for rows in ([{"prompt": "ok"}, {"no_prompt": 1}], [{"prompt": "ok", "files": "fixtures"}]):
        data = write_dataset(tmp_path / "p.jsonl", rows)
        _age(data, 60)
        source = open_dataset(data)
        cache = ScanCache(tmp_path, source, cache_key(SETTINGS, Selection()))
        found = scan_selected(source, Selection(), "id", True, extra_check=cache.watching(None))
        cache.save(found)
        assert not (tmp_path / NAME).exists() and _load(tmp_path, data) is None


def test_an_ids_file_selection_is_not_cached(tmp_path: Path) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("a\n")
    assert cache_key(SETTINGS, from_settings({"dataset": {"ids_file": str(ids)}})) is None


def test_cli_resume_after_a_same_size_edit_runs_the_edited_row(tmp_path: Path, mock_server) -> None:
    rows, data, args = aged_run(tmp_path, mock_server.base_url, "cache")
    assert run_cli(tmp_path, *args).returncode == 0
    out = tmp_path / "outputs" / "cache"
    assert (out / NAME).is_file()
    again = run_cli(tmp_path, *args)
    assert again.returncode == 0 and "nothing to run" in again.stderr
    rows[2] = {"prompt": "Say hello number 9"}  # same size
    size = data.stat().st_size
    write_dataset(data, rows)
    assert data.stat().st_size == size
    _age(data, 30)
    edited = run_cli(tmp_path, *args)
    assert edited.returncode == 0, edited.stderr
    assert "1 planned now" in edited.stderr
    text = (out / "trajectories.jsonl").read_text()
    assert len(text.splitlines()) == 4
    assert "Say hello number 9" in text and "Say hello number 2" not in text


def test_the_cache_signature_and_the_run_stamp_read_one_stat(tmp_path: Path) -> None:
    """A file: the cache's signature and the stamp `changed_since` compares agree. A folder (Harbor
    tasks, a saved dataset): never cached, and still stamped, so adding a task folder is noticed."""
    from hermes_exp.dataset.tasks import changed_since, source_stamp
    from hermes_exp.run.scan_cache import file_signature

    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": "task A"}])
    _age(data, 60)
    _scan_and_save(tmp_path, data)
    source = open_dataset(data)
    assert source_stamp(source) == tuple(file_signature(data)[1:])
    cached = _load(tmp_path, data)
    assert cached.stamp == source_stamp(source) and not changed_since(source, cached)
    write_dataset(data, [{"prompt": "task B"}, {"prompt": "task C"}])
    assert changed_since(source, cached)

    folder = tmp_path / "tasks"
    (folder / "one").mkdir(parents=True)
    assert file_signature(folder) is None
    before = source_stamp(SimpleNamespace(path=folder))
    assert before is not None
    time.sleep(0.01)
    (folder / "two").mkdir()
    assert source_stamp(SimpleNamespace(path=folder)) != before
