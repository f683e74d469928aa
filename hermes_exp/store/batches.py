"""batch_N.jsonl: the kept trajectories grouped by the batch each finished in, copied from the bytes
just written to trajectories.jsonl (each trajectory is built once per export, not once per file)."""

from __future__ import annotations

from array import array
from itertools import groupby
from pathlib import Path

from hermes_exp.store.atomic import atomic_writer

NO_BATCH = -1  # a row without a batch number (written as batch_None.jsonl, as before)


class BatchPlaces:
    """Where each kept line sits in trajectories.jsonl (its batch, byte offset and length), in the order
    written: dataset order, which is also the order of the lines within a batch file."""

    def __init__(self) -> None:
        self.batches, self.offsets, self.lengths = array("q"), array("q"), array("q")
        self._end = 0

    def add(self, batch_num: int | None, line: str) -> None:
        self.add_size(batch_num, len(line.encode("utf-8")))

    def add_size(self, batch_num: int | None, size: int) -> None:
        self.batches.append(NO_BATCH if batch_num is None else batch_num)
        self.offsets.append(self._end)
        self.lengths.append(size)
        self._end += size

    def write(self, source: Path, run_dir: Path, unchanged: frozenset[str] = frozenset()) -> dict[str, int]:
        """Write every batch file from `source` (the trajectories.jsonl the places point into), but those
        named in `unchanged` (known to hold these very bytes already); remove the batch files of batches
        that no longer hold a kept line. Returns each batch file's name and its number of lines."""
        order = sorted(range(len(self.batches)), key=self.batches.__getitem__)  # stable: dataset order kept
        written: dict[str, int] = {}
        with source.open("rb") as lines:
            for batch, group in groupby(order, key=self.batches.__getitem__):
                name = batch_name(batch)
                if name in unchanged:
                    written[name] = sum(1 for _ in group)
                    continue
                written[name] = 0
                with atomic_writer(run_dir / name, binary=True) as out:
                    for n in group:
                        written[name] += 1
                        lines.seek(self.offsets[n])
                        out.write(lines.read(self.lengths[n]))
        for stale in run_dir.glob("batch_*.jsonl"):
            if stale.name not in written:
                stale.unlink()
        return written


def batch_name(batch: int | None) -> str:
    return f"batch_{'None' if batch in (None, NO_BATCH) else batch}.jsonl"
