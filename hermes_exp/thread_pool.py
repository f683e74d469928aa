"""The threads executor's sessions (executor.py, backend=threading): `n_jobs` threads of this process,
each taking the next task when it is free; results come back as they finish.

joblib's threading backend held, for every task in flight, its batch and the batch's callback, a
nested `parallel_config` with its copies of the config, and the pool's ApplyResult with its Event:
~8 MB at 1024 sessions (bench/RESULTS.md, eighth pass). Here a session holds its thread and nothing
else. A task is read from the iterable (and so marked running) only when a thread starts it."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

_END = object()  # a thread's last item: it takes no more tasks


def map_unordered(fn: Callable[..., Any], settings: dict[str, Any], tasks: Iterable[Any],
                  n_jobs: int) -> Iterator[Any]:
    """fn(settings, task) for every task, on `n_jobs` threads. The first exception (of a task, or of
    the iterable) is raised here, as joblib raises it; then, as when the caller stops early, no thread
    takes another task, and the tasks in flight end on their own threads (the caller's cancel)."""
    source = iter(tasks)
    lock = threading.Lock()  # the iterable is read by one thread at a time
    stop = threading.Event()
    results: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def work() -> None:
        try:
            while not stop.is_set():
                with lock:
                    task = next(source, _END)
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
