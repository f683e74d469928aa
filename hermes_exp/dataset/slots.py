"""A scan's tasks and spool positions, packed: ~32 bytes per task (row index, sample, the key's 16-byte digest)
instead of a Slot tuple, its key string, its ints and a list entry (~0.18 KB), and two integers per row
instead of a dict entry (~0.1 KB). What the planning holds for a 100k-row dataset: ~4 MB instead of ~27 MB.
They read back exactly as they were written (a key not of the packed form is kept as it is)."""

from __future__ import annotations

import operator
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

PREFIX = "v1:"  # dataset.task_key's keys: PREFIX + 32 lowercase hex digits, packed as their 16 bytes
_LENGTH = len(PREFIX) + 32


class Slot(NamedTuple):
    """One task of the dataset: its row index, task key and sample number."""

    index: int
    key: str
    sample: int = 0


class SlotList(Sequence):
    """Slots in scan order, packed; reads as a sequence of Slot (an index or a slice)."""

    def __init__(self, slots: Iterable[Sequence[Any]] = ()) -> None:
        self._index, self._sample, self._keys = array("q"), array("q"), bytearray()
        self._odd: dict[int, str] = {}  # position -> a key not of the packed form
        self.extend(slots)

    def append(self, slot: Sequence[Any]) -> None:
        """Add one slot: (index, key, sample) or (index, key), as Slot(*slot) takes them."""
        index, key, sample = (*slot, 0) if len(slot) == 2 else slot
        self.add(index, key, sample)

    def add(self, index: int, key: str, sample: int = 0) -> None:
        if not isinstance(key, str):
            raise TypeError(f"a slot's key must be a string, got {type(key).__name__}")
        packed = _packed(key)
        if packed is None:
            self._odd[len(self._index)] = key
            packed = bytes(16)
        self._index.append(index)  # first: a bad index adds nothing
        self._sample.append(sample)
        self._keys += packed

    def extend(self, slots: Iterable[Sequence[Any]]) -> None:
        for slot in slots:
            self.append(slot)

    def __len__(self) -> int:
        return len(self._index)

    def _key(self, n: int) -> str:
        odd = self._odd.get(n)
        return odd if odd is not None else PREFIX + self._keys[16 * n:16 * n + 16].hex()

    def __getitem__(self, n: Any) -> Any:
        if isinstance(n, slice):
            return [self[i] for i in range(*n.indices(len(self)))]
        n = operator.index(n)
        if n < 0:
            n += len(self)
        if not 0 <= n < len(self):
            raise IndexError("slot index out of range")
        return Slot(self._index[n], self._key(n), self._sample[n])

    def __iter__(self) -> Iterator[Slot]:
        step = 4096  # keys turned back into text a chunk at a time
        for start in range(0, len(self), step):
            digits = self._keys[16 * start:16 * (start + step)].hex()
            for n, (index, sample) in enumerate(zip(self._index[start:start + step], self._sample[start:start + step])):
                odd = self._odd.get(start + n) if self._odd else None
                yield Slot(index, odd if odd is not None else PREFIX + digits[32 * n:32 * n + 32], sample)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes, bytearray)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SlotList({list(self)!r})"


def _packed(key: str) -> bytes | None:
    if len(key) != _LENGTH or not key.startswith(PREFIX):
        return None
    tail = key[len(PREFIX):]
    try:
        packed = bytes.fromhex(tail)
    except ValueError:
        return None
    return packed if packed.hex() == tail else None  # upper-case digits would not read back the same


class RowOffsets:
    """row index -> position in the scan's spool, as a dict would say; rows written in increasing order
    (a scan's) are packed, any other write is kept aside and wins."""

    def __init__(self) -> None:
        self._rows, self._at = array("q"), array("q")
        self._odd: dict[int, int] = {}

    def __setitem__(self, row: int, at: int) -> None:
        if not self._odd and (not self._rows or row > self._rows[-1]):
            self._rows.append(row)
            self._at.append(at)
        else:
            self._odd[row] = at

    def __getitem__(self, row: int) -> int:
        if row in self._odd:
            return self._odd[row]
        n = bisect_left(self._rows, row)
        if n < len(self._rows) and self._rows[n] == row:
            return self._at[n]
        raise KeyError(row)

    def __contains__(self, row: object) -> bool:
        try:
            self[row]  # type: ignore[index]
        except (KeyError, TypeError):
            return False
        return True

    def items(self) -> Iterator[tuple[int, int]]:
        for row, at in zip(self._rows, self._at):
            if row not in self._odd:
                yield row, at
        yield from self._odd.items()

    def __len__(self) -> int:
        return len(self._odd) + sum(1 for row in self._rows if row not in self._odd) if self._odd else len(self._rows)
