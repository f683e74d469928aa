"""A scan's tasks and spool positions packed (slots.py) read back exactly as a list of Slot and a dict would,
whatever the keys; the scan cache's file is byte for byte what it was; what a scan holds per task is small
(tracemalloc: Python's own allocations, counted, not timed)."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
from conftest import write_dataset

from hermes_exp.dataset.tasks import Slot, open_dataset, scan, task_key
from hermes_exp.run.scan_cache import _write_slots
from hermes_exp.dataset.slots import RowOffsets, SlotList

KEYS = [task_key({"prompt": "p"}, 0, "id"), "k1", "v1:" + "AB" * 16, "v1:" + "zz" * 16, "v1:" + "0" * 31, ""]


def test_slots_read_back_as_they_were_added() -> None:
    slots = [Slot(i * 7, key, i % 3) for i, key in enumerate(KEYS * 3)]
    packed = SlotList(slots)
    assert list(packed) == slots and packed == slots and slots == packed and packed == SlotList(slots)
    assert len(packed) == len(slots) and packed[0] == slots[0] and packed[-1] == slots[-1]
    assert packed[2:9:3] == slots[2:9:3] and packed[::-1] == slots[::-1]
    assert [tuple(s) for s in SlotList([[1, KEYS[0]], (2, "k", 5)])] == [(1, KEYS[0], 0), (2, "k", 5)]
    assert packed != slots[:-1] and packed != [*slots[:-1], Slot(0, "other", 0)]
    with pytest.raises(IndexError):
        packed[len(slots)]
    for bad in ([1, 2, 3], [1, "k", 0, 9], ["x", "k", 0]):
        with pytest.raises((TypeError, ValueError)):
            SlotList([bad])


def test_row_offsets_answer_as_a_dict() -> None:
    writes = [(0, 0), (2, 10), (5, 30), (3, 40), (5, 50), (9, 60), (1, 70)]
    packed, plain = RowOffsets(), {}
    for n, (row, at) in enumerate(writes):
        packed[row], plain[row] = at, at
        assert dict(packed.items()) == plain and len(packed) == len(plain)
        assert all(packed[r] == plain[r] for r in plain)
        for absent in (4, 8, 100, -1):
            assert (absent in packed) == (absent in plain)
    with pytest.raises(KeyError):
        packed[4]


def test_the_cache_line_is_json_dumps_of_the_whole_list(tmp_path: Path) -> None:
    for count in (0, 1, 3, 10):
        slots = [Slot(i, KEYS[i % len(KEYS)], i % 2) for i in range(count)]
        with (tmp_path / "out").open("w") as out:
            _write_slots(out, SlotList(slots), chunk=3)
        expected = json.dumps([list(slot) for slot in slots], separators=(",", ":")) + "\n"
        assert (tmp_path / "out").read_text() == expected


def test_a_scan_holds_a_few_dozen_bytes_per_task(tmp_path: Path) -> None:
    rows = [{"prompt": f"Question number {i}: how many words?"} for i in range(20_000)]
    data = write_dataset(tmp_path / "p.jsonl", [*rows, rows[5], rows[5]])  # duplicates keep their occurrence
    source = open_dataset(str(data))
    with (tmp_path / "spool").open("w+b") as spool:
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            found = scan(source, "id1:x", False, None, spool=spool)
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert held / len(found.indexed) < 80  # a list of Slot and a dict of offsets held ~270 bytes per task
        keys = [slot.key for slot in found.indexed]
        assert len(set(keys)) == len(rows) + 2 and keys[5] == task_key(rows[5], 0, "id1:x")
        assert keys[-1] == task_key(rows[5], 2, "id1:x")
        spool.seek(found.offsets[20_001])
        assert json.loads(spool.readline()) == rows[5]
