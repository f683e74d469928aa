"""The threads executor's sessions (executor.py, backend=threading): `n_jobs` threads of this process,
each taking the next task when it is free; results come back as they finish.

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
    """fn(settings, task) for every task, on `n_jobs` threads. Up to `ahead` tasks are read and not yet
    finished, as joblib's pre_dispatch (a task is marked running when it is read; those read start even
    once the iterable has ended, e.g. a run stopped by its budget). The first exception (of a task, or
    of the iterable) is raised here, as joblib raises it; then, as when the caller stops early, no
    thread starts another task, and the tasks in flight end on their own threads (the caller's cancel)."""
    source = iter(tasks)
    lock = threading.Lock()  # the iterable and the tasks read ahead, one thread at a time
    stop = threading.Event()
    waiting: deque[Any] = deque()  # read, not started
    ended = False
    results: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def take() -> Any:
        nonlocal ended
        with lock:
            while not ended and len(waiting) <= ahead - n_jobs:
                task = next(source, _END)
                ended = task is _END
                if not ended:
                    waiting.append(task)
            return waiting.popleft() if waiting else _END

    def work() -> None:
        try:
            while not stop.is_set():
                task = take()
                if task is _END:
                    break
                results.put((fn(settings, task), None))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, as joblib does
            stop.set()
            results.put((None, exc))
        finally:
            results.put(_END)

    for i in range(n_jobs):
        threading.Thread(target=work, name=f"hx-session-{i}", daemon=True).start()
    running = n_jobs
    try:
        while running:
            item = results.get()
            if item is _END:
                running -= 1
                continue
            result, error = item
            if error is not None:
                raise error
            yield result
    finally:
        stop.set()
