"""The threads executor (executor=threads, thread_pool.py): every task once, results as they finish, tasks
read ahead as joblib read them, the first error raised in the caller, and no task started once the
caller stops (without waiting for the tasks in flight: joblib's close did) or a task failed; threads
started only for tasks (a real run resumed for 3 tasks with num_workers=256 starts 3 at most)."""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_exp.executor.backends import JoblibExecutor


def _reading(n: int, read: list[int]) -> Iterator[int]:
    for i in range(n):
        read.append(i)
        yield i


def test_tasks_are_read_ahead_as_joblib_read_them_and_every_one_runs_once() -> None:
    read: list[int] = []
    started, release = threading.Semaphore(0), threading.Event()
    seen: list[dict] = []

    def fn(settings: dict, task: int) -> int:
        seen.append(settings["invocation"])
        started.release()
        release.wait()
        return task

    results: list[int] = []
    executor = JoblibExecutor(backend="threading", n_jobs=2)
    consumer = threading.Thread(target=lambda: results.extend(executor.map_unordered(fn, {}, _reading(10, read))))
    consumer.start()
    started.acquire()
    started.acquire()
    assert read == [0, 1, 2, 3]  # pre_dispatch="2*n_jobs", as joblib read them
    release.set()
    consumer.join()
    assert sorted(results) == list(range(10)) and read == list(range(10))
    assert all(s == {"processes": 1} for s in seen)


def test_the_first_error_is_raised_in_the_caller_and_no_task_starts_after_it() -> None:
    read: list[int] = []
    done: list[int] = []
    started: list[int] = []

    def fn(settings: dict, task: int) -> int:
        started.append(task)
        if task == 3:
            raise ValueError("task 3 failed")
        return task

    executor = JoblibExecutor(backend="threading", n_jobs=1)
    with pytest.raises(ValueError, match="task 3 failed"):
        done.extend(executor.map_unordered(fn, {}, _reading(100, read)))
    assert started == [0, 1, 2, 3] and done == [0, 1, 2] and read == [0, 1, 2, 3, 4]  # 4 was read ahead, never started


def test_an_error_of_the_iterable_is_raised_in_the_caller() -> None:
    def tasks() -> Iterator[int]:
        yield 0
        raise OSError("the dataset went away")

    with pytest.raises(OSError, match="went away"):
        list(JoblibExecutor(backend="threading", n_jobs=3).map_unordered(lambda s, t: t, {}, tasks()))


def test_a_caller_that_stops_early_lets_the_tasks_in_flight_end_and_starts_no_other() -> None:
    read: list[int] = []
    started, release = threading.Semaphore(0), threading.Event()
    threads: list[threading.Thread] = []
    ran: list[int] = []

    def fn(settings: dict, task: int) -> int:
        threads.append(threading.current_thread())
        ran.append(task)
        started.release()
        if task:
            release.wait()
        return task

    results = JoblibExecutor(backend="threading", n_jobs=1).map_unordered(fn, {}, _reading(100, read))
    assert next(results) == 0
    started.acquire()
    started.acquire()  # task 1 is in flight
    results.close()
    release.set()
    threads[0].join()
    assert ran == [0, 1] and read == [0, 1, 2]  # 1 was in flight when the caller stopped; no other began


@pytest.mark.parametrize("pre_dispatch", ["n_jobs", "2*n_jobs", "all"])
def test_threads_are_started_while_tasks_wait_up_to_n_jobs(pre_dispatch: str) -> None:
    together = threading.Barrier(4, timeout=60)  # broken unless 4 tasks run at once
    names: set[str] = set()

    def fn(settings: dict, task: int) -> int:
        names.add(threading.current_thread().name)
        if task < 4:
            together.wait()
        return task

    executor = JoblibExecutor(backend="threading", n_jobs=4, pre_dispatch=pre_dispatch)
    assert sorted(executor.map_unordered(fn, {}, iter(range(20)))) == list(range(20))
    assert names == {f"hx-session-{i}" for i in range(4)}


def test_a_run_resumed_for_3_tasks_with_256_workers_starts_at_most_3_session_threads(tmp_path: Path) -> None:
    from test_providers import settings_for

    from hermes_exp.run import invocation as run_mod

    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"count the words {i}"}) + "\n" for i in range(6)))
    out = tmp_path / "out"
    common = (f"run_dir={out}", f"dataset.path={data}", "sandbox=local", "distribution=terminal_only")
    assert run_mod.run(settings_for(*common, "num_workers=2")) == 0
    with sqlite3.connect(out / "ledger.db") as conn:  # 3 provider errors: retried by the next invocation
        conn.execute("UPDATE tasks SET state = 'error', error_class = 'provider' WHERE prompt_index < 3")
    names: list[str] = []

    def first_call(*_: object) -> None:  # each thread threading starts: its name, then no more tracing
        names.append(threading.current_thread().name)
        sys.settrace(None)

    threading.settrace(first_call)
    try:
        assert run_mod.run(settings_for(*common, "num_workers=256")) == 0
    finally:
        threading.settrace(None)
    sessions = [name for name in names if name.startswith("hx-session-")]
    assert 1 <= len(sessions) <= 3, sessions
    with sqlite3.connect(out / "ledger.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM tasks WHERE state = 'done'").fetchone()[0] == 6
