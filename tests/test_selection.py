"""Selection: slice, seeded shuffle, ids_file and where pick the expected rows, keep every task's key,
and resume and statistics follow them (real CLI, real mock server, real SQLite)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from conftest import agent_bodies, read_jsonl, run_cli, user_prompt, write_dataset

from hermes_exp.dataset.tasks import open_dataset, scan
from hermes_exp.errors import ConfigError, DatasetError
from hermes_exp.dataset.selection import from_settings, scan_selected

IDENTITY = "id1:test"


def _rows(n: int) -> list[dict]:
    rows = [{"id": f"r{i}", "prompt": f"Selected task {i}", "topic": f"t{i % 3}", "level": i % 4} for i in range(n)]
    rows[5] = dict(rows[4])  # identical rows: two tasks, told apart by their occurrence
    return rows


def _pick(data: Path, **dataset) -> list[tuple[int, str]]:
    settings = {"dataset": {"path": str(data), **dataset}}
    return scan_selected(open_dataset(settings["dataset"]), from_settings(settings), IDENTITY, False).indexed


def test_slice_shuffle_ids_and_where_pick_rows_and_keep_their_keys(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", _rows(30))
    every = {slot.index: slot.key for slot in scan(open_dataset(str(data)), IDENTITY, False, None).indexed}
    for picked in (_pick(data, slice="0:10"), _pick(data, slice="5:6"), _pick(data, shuffle=3, slice="0:8"),
                   _pick(data, where={"topic": "t1"}), _pick(data, slice="-3:")):
        assert all(every[index] == key for index, key, _ in picked)  # a selection never changes a key
    assert [i for i, *_ in _pick(data, slice="0:10")] == list(range(10))
    assert [i for i, *_ in _pick(data, slice="5:6")] == [5]  # the second of two identical rows
    assert [i for i, *_ in _pick(data, slice="-3:")] == [27, 28, 29]

    shuffled = [i for i, *_ in _pick(data, shuffle=3, slice="0:8")]
    assert shuffled == [i for i, *_ in _pick(data, shuffle=3, slice="0:8")]  # stable
    assert shuffled != list(range(8)) and len(set(shuffled)) == 8
    assert shuffled != [i for i, *_ in _pick(data, shuffle=4, slice="0:8")]
    longer = write_dataset(tmp_path / "longer.jsonl", _rows(30) + [{"prompt": f"Appended {i}"} for i in range(20)])
    order = [i for i, *_ in _pick(longer, shuffle=3)]
    assert [i for i in order if i < 30] == [i for i, *_ in _pick(data, shuffle=3)]  # appending keeps the order

    ids = tmp_path / "ids.txt"
    ids.write_text("r3\nr11\n\nr29\nr99\n")
    assert [i for i, *_ in _pick(data, ids_file=str(ids))] == [3, 11, 29]
    assert [i for i, *_ in _pick(data, where={"topic": "t1", "level": [1, "3"]})] == [1, 7, 13, 19, 25]
    assert [i for i, *_ in _pick(data, where=["topic=t2", "level=1"])] == [17, 29]
    assert [i for i, *_ in _pick(data, where={"topic": "t1"}, slice="1:3")] == [4, 5]  # a duplicate is selected by content too


def test_bad_selections_say_what_to_write(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "p.jsonl", _rows(6))
    with pytest.raises(ConfigError, match="dataset.slice='a:b'"):
        _pick(data, slice="a:b")
    with pytest.raises(ConfigError, match="is not START:STOP"):
        _pick(data, slice="10")
    with pytest.raises(ConfigError, match="dataset.ids_file: file not found"):
        _pick(data, ids_file=str(tmp_path / "missing.txt"))
    with pytest.raises(ConfigError, match="dataset.shuffle"):
        _pick(data, shuffle="yes")
    with pytest.raises(DatasetError, match="keeps none of the 6 valid rows.*where topic") as err:
        _pick(data, where={"topic": "nope"})
    assert "the rows' values of topic: 't0', 't1', 't2'" in str(err.value)  # what there is to pick
    with pytest.raises(DatasetError) as err:  # a field no row has (a typo): named, with the fields there are
        _pick(data, where={"topc": "math"})
    assert "no row has the field 'topc' (the rows' fields: " in str(err.value) and "topic" in str(err.value)
    with pytest.raises(DatasetError, match="picks no rows.*slice 10:"):
        _pick(data, slice="10:")


def _ran(record: Path) -> Counter:
    return Counter(user_prompt(b) for b in agent_bodies(record))


def test_resume_and_statistics_follow_the_slice(tmp_path: Path, mock_server) -> None:
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"Slice task {i}"} for i in range(12)])
    args = [f"dataset.path={data}", "run_name=sel", f"model.base_url={mock_server.base_url}"]
    out, record = tmp_path / "outputs" / "sel", tmp_path / "requests.jsonl"

    def stats() -> dict:
        return json.loads((out / "statistics.json").read_text())

    assert run_cli(tmp_path, *args, "dataset.slice=0:5").returncode == 0
    assert set(_ran(record)) == {f"Slice task {i}" for i in range(5)}
    assert stats()["total_prompts"] == 5 and stats()["kept"] == 5
    before = _ran(record)
    wider = run_cli(tmp_path, *args, "dataset.slice=0:8")
    assert wider.returncode == 0, wider.stderr
    new = _ran(record) - before
    assert set(new) == {"Slice task 5", "Slice task 6", "Slice task 7"}  # only the new rows
    assert stats()["total_prompts"] == 8 and stats()["kept"] == 8 and stats()["pending"] == 0
    narrower = run_cli(tmp_path, *args, "dataset.slice=2:4")
    assert "nothing to run" in narrower.stderr
    assert stats()["total_prompts"] == 2 and stats()["kept"] == 2
    assert sorted(r["prompt_index"] for r in read_jsonl(out / "trajectories.jsonl")) == [2, 3]
    whole = run_cli(tmp_path, *args)
    assert whole.returncode == 0
    assert stats()["total_prompts"] == 12 and stats()["kept"] == 12
    assert set(_ran(record) - before - new) == {f"Slice task {i}" for i in range(8, 12)}
    assert all(_ran(record)[p] == n for p, n in (before + new).items())  # nothing ran twice
