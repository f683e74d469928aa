"""The export's tasks, one at a time in dataset order: each with its score, statistics facts and lines,
a line copied from the previous export's files (store/export_reuse.py) when the task's ledger columns,
its score and the settings are those it was made from, else rendered from the decoded result."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from hermes_exp.store.atif import ATIF_FILE, atif_record
from hermes_exp.store.export_reuse import LINE_FILES, OPENAI_FILE, Entry, Previous, version
from hermes_exp.store.formats import openai_record
from hermes_exp.store.ledger import Ledger
from hermes_exp.store.sharegpt import system_mode, trajectory
from hermes_exp.store.stats import facts as result_facts
from hermes_exp.tools.registry import Registry
from hermes_exp.store.score_book import ScoreBook, spec


class Task:
    """A visible ledger row; `facts` is None when it has no result (not done or filtered, or empty)."""

    __slots__ = ("row", "version", "entry", "facts", "score", "result")

    def __init__(self, row: dict[str, Any]) -> None:
        self.row = row
        self.version = b""
        self.entry: Entry | None = None
        self.facts: dict[str, Any] | None = None
        self.score: dict[str, Any] | None = None
        self.result: dict[str, Any] | None = None

    @property
    def shown(self) -> tuple[float | None, bool | None]:
        """What of its score a task's lines show."""
        return (self.score or {}).get("reward"), (self.score or {}).get("passed")


class Tasks:
    def __init__(self, ledger: Ledger, settings: dict[str, Any], registry: Registry,
                 previous: Previous | None) -> None:
        self.ledger, self.registry, self.previous = ledger, registry, previous
        self.model, self.system = settings["model"]["name"], system_mode(settings)
        self.book = ScoreBook(ledger, settings)
        self.rendered = self.seen = 0  # tasks with a result; of them, those whose result was decoded

    def each(self, visible: Any) -> Iterator[Task]:
        """Every row `visible` accepts, in dataset order (rows read without their results when there is
        an index to reuse: a result is then read only for a line to render)."""
        if self.previous is not None:
            self.previous.rewind()
        self.rendered = self.seen = 0
        for row in self.ledger.rows(results=self.previous is None):
            if not visible(row):
                continue
            task = Task(row)
            if row["state"] in ("done", "filtered"):
                self._settle(task)
            yield task

    def ranked(self, chosen: Any) -> Iterator[tuple[dict[str, Any], dict[str, Any] | None, int]]:
        """best_of_n's input (store/samples.py Selection): every visible done sample, its score, its turns."""
        for task in self.each(chosen.visible):
            if task.row["state"] != "done":
                continue
            if task.facts is None:  # a done row without a result ranks as an empty one, as it always did
                yield task.row, self.book.get(task.row["key"], {}), 0
            else:
                yield task.row, task.score, task.facts["turns"]

    def _settle(self, task: Task) -> None:
        row = task.row
        task.version = version(row)
        entry = None
        if self.previous is not None and isinstance(row["prompt_index"], int):  # (an index is by prompt_index)
            entry = self.previous.find(row["prompt_index"], row["key"])
        if entry is not None and entry.version == task.version:
            task.entry, task.facts = entry, entry.facts
            self.seen += 1
        else:
            result = self.result(task)
            if result is None:
                return
            self.seen += 1
            task.facts = {**result_facts(result), "spec": spec(result.get("row") or {})}
        task.score = self.book.get_spec(row["key"], task.facts["spec"])

    def result(self, task: Task) -> dict[str, Any] | None:
        """The task's decoded result (read from the ledger if its row came without it)."""
        if task.result is None:
            row = task.row
            if "result" not in row:
                row["result"], row["tools"] = self.ledger.result_of(row["key"])
            if row["result"]:
                task.result = json.loads(row["result"])
                self.rendered += 1
        return task.result

    def line(self, task: Task) -> tuple[bytes, int]:
        """The task's ShareGPT line, and the number of the file it was copied from (0: rendered)."""
        entry = task.entry
        if entry is not None and entry.line[0] and entry.shown == task.shown:
            number, offset, length = entry.line
            return self.previous.read(LINE_FILES[number], offset, length), number  # type: ignore[union-attr]
        result = self.result(task) or {}
        line = trajectory(task.row, result, result.get("row", {}), self.model, self.system, self.registry, task.score)
        return (json.dumps(line, ensure_ascii=False) + "\n").encode(), 0

    def openai_line(self, task: Task, score: dict[str, Any] | None) -> bytes:
        return self.format_line(OPENAI_FILE, task, score)

    def format_line(self, name: str, task: Task, score: dict[str, Any] | None) -> bytes:
        """The task's line of format file `name` (OPENAI_FILE, ATIF_FILE), copied from the last export's
        file when the index has it for the score it shows."""
        entry = task.entry
        if entry is not None and entry.shown == task.shown:
            offset, length = entry.openai if name == OPENAI_FILE else entry.atif
            if length >= 0:
                return self.previous.read(name, offset, length)  # type: ignore[union-attr]
        make = openai_record if name == OPENAI_FILE else atif_record
        record = make(task.row, self.result(task) or {}, self.model, score, self.registry)
        return (json.dumps(record, ensure_ascii=False) + "\n").encode()
