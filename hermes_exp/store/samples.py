"""Which kept samples the exports hold: `selection: all | passed | best_of_n` over the samples within
`samples_per_prompt`, each with its score under the current verifier. best_of_n keeps, per prompt,
the passing sample with the highest reward (ties: fewer turns, then the lower sample number)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from hermes_exp.errors import ConfigError
from hermes_exp.store.ledger import Ledger
from hermes_exp.store.score_book import ScoreBook

SELECTIONS = ("all", "passed", "best_of_n")


def selection_mode(settings: dict[str, Any]) -> str:
    mode = settings.get("selection") or "all"
    if mode not in SELECTIONS:
        raise ConfigError(f"selection={mode!r} is not a selection",
                          f"choose one of: {', '.join(SELECTIONS)} (best_of_n: the best passing sample per prompt)")
    return mode


def turns(result: dict[str, Any]) -> int:
    return sum(1 for m in result.get("messages") or [] if m.get("role") == "assistant")


class Selection:
    """What an export needs per ledger row: is it visible, what is its score, is it selected."""

    def __init__(self, ledger: Ledger, settings: dict[str, Any], mode: str, ranked: Any = None) -> None:
        """`mode`: the checked `selection` (selection_mode); `ranked`: given a Selection, yields (row, score, turns) of every visible `done` sample in dataset
        order (best_of_n's input; by default decoded from the ledger's results)."""
        self.mode = mode
        self.samples = int(settings.get("samples_per_prompt", 1) or 1)
        self.book = ScoreBook(ledger, settings)
        self._best: set[str] = set()
        if self.mode == "best_of_n":
            self._best = best_keys(ranked(self) if ranked is not None else self._ranked(ledger))

    def visible(self, row: dict[str, Any]) -> bool:
        """Samples beyond samples_per_prompt (it was lowered) stay in the ledger, out of every export."""
        return (row.get("sample") or 0) < self.samples

    def score(self, row: dict[str, Any], result: dict[str, Any]) -> dict[str, Any] | None:
        return self.book.get(row["key"], result.get("row") or {})

    def keep(self, row: dict[str, Any], score: dict[str, Any] | None) -> bool:
        """A kept (`done`) sample, visible: is it selected?"""
        if self.mode == "all":
            return True
        if self.mode == "passed":
            return bool((score or {}).get("passed"))
        return row["key"] in self._best

    def _ranked(self, ledger: Ledger) -> Iterator[tuple[dict[str, Any], dict[str, Any] | None, int]]:
        for row in ledger.rows(("done",)):
            if self.visible(row):
                result = json.loads(row["result"] or "{}")
                yield row, self.score(row, result), turns(result)


def best_keys(ranked: Iterable[tuple[dict[str, Any], dict[str, Any] | None, int]]) -> set[str]:
    """One pass in dataset order: the best passing sample of each prompt (one key per prompt kept)."""
    best: dict[int, tuple[tuple[float, int, int], str]] = {}
    for row, score, n_turns in ranked:
        score = score or {}
        if not score.get("passed"):
            continue
        rank = (-(score.get("reward") or 0.0), n_turns, row.get("sample") or 0)
        index = row["prompt_index"]
        if index not in best or rank < best[index][0]:
            best[index] = (rank, row["key"])
    return {key for _, key in best.values()}
