"""The threads executor's sessions (executor.py, backend=threading): up to `n_jobs` threads of this
process, each taking the next task when it is free; results come back as they finish. A thread is
started for a task read with no thread free to take it: a run resumed for 3 tasks with num_workers=256
starts 3 threads, not 256 of which 253 find nothing to do.

joblib's threading backend held, for every task in flight, its batch and the batch's callback, a
nested `parallel_config` with its copies of the config, and the pool's ApplyResult with its Event:
~8 MB at 1024 sessions (bench/RESULTS.md, eighth pass). Here a session holds its thread and nothing
else; tasks are read ahead as joblib read them."""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

_END = object()  # a thread's last item: it takes no more tasks


def map_unordered(fn: Callable[..., Any], settings: dict[str, Any], tasks: Iterable[Any],
                  n_jobs: int, ahead: int) -> Iterator[Any]:
    """fn(settings, task) for every task, on up to `n_jobs` threads. Up to `ahead` tasks are read and not
    yet finished, as joblib's pre_dispatch (a task is marked running when it is read; those read start
    even once the iterable has ended, e.g. a run stopped by its budget). The first exception (of a task,
    or of the iterable) is raised here, as joblib raises it; then, as when the caller stops early, no
    thread starts another task, and the tasks in flight end on their own threads (the caller's cancel)."""
    sessions = _Sessions(fn, settings, iter(tasks), n_jobs, ahead)
    sessions.launch(0)  # it reads the first tasks; a further thread is started for each left waiting
    ended = 0
    try:
        while ended < sessions.started:  # `started` counts a thread before the one starting it can end
            item = sessions.results.get()
            if item is _END:
                ended += 1
                continue
            result, error = item
            if error is not None:
                raise error
            yield result
    finally:
        sessions.stop.set()


class _Sessions:
    """The threads of one map_unordered and what they share. Each puts its results, an error, and
    last _END in `results`."""

    def __init__(self, fn: Callable[..., Any], settings: dict[str, Any], source: Iterator[Any],
                 n_jobs: int, ahead: int) -> None:
        self.fn, self.settings, self.source, self.n_jobs, self.ahead = fn, settings, source, n_jobs, ahead
        self.lock = threading.Lock()  # the iterable, the tasks read ahead and the counts, one thread at a time
        self.stop = threading.Event()
        self.waiting: deque[Any] = deque()  # read, not started
        self.ended = False
        self.started = 1  # threads started (the first, by the caller): each ends with one _END
        self.unclaimed = 1  # threads started that have not taken a task yet: each has one waiting for it
        self.results: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def launch(self, number: int) -> None:
        threading.Thread(target=self.work, name=f"hx-session-{number}", daemon=True).start()

    def take(self, first: bool) -> tuple[Any, int | None]:
        """The next task (or _END), and the number of a thread to start for a task left waiting with no
        thread to take it (counted here, before this thread can end: the caller waits for it too)."""
        with self.lock:
            self.unclaimed -= first
            # `ahead` read and not finished: one in flight on each started thread, the rest waiting
            while not self.ended and len(self.waiting) <= self.ahead - self.started:
                task = next(self.source, _END)
                self.ended = task is _END
                if not self.ended:
                    self.waiting.append(task)
            task = self.waiting.popleft() if self.waiting else _END
            if len(self.waiting) > self.unclaimed and self.started < self.n_jobs and not self.stop.is_set():
                self.started, self.unclaimed = self.started + 1, self.unclaimed + 1
                return task, self.started - 1
            return task, None

    def work(self) -> None:
        first = True
        try:
            while not self.stop.is_set():
                task, new = self.take(first)
                first = False
                if new is not None:
                    self.launch(new)
                if task is _END:
                    break
                self.results.put((self.fn(self.settings, task), None))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, as joblib does
            self.stop.set()
            self.results.put((None, exc))
        finally:
            self.results.put(_END)
