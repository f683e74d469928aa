"""Parallel execution through joblib: results come back unordered, as they finish."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from joblib import Parallel, delayed


class JoblibExecutor:
    """`backend` is any joblib backend name: threading (default), loky, dask, ray.

    Tasks are pulled lazily from the iterable (at most `pre_dispatch` ahead), so a dataset of any
    size streams through without being held in memory."""

    def __init__(self, backend: str = "threading", n_jobs: int = 4, pre_dispatch: str = "2*n_jobs",
                 **_: Any) -> None:
        self.backend = backend
        self.n_jobs = int(n_jobs)
        self.pre_dispatch = pre_dispatch

    def map_unordered(self, fn: Callable[..., dict[str, Any]], settings: dict[str, Any],
                      tasks: Iterable[Any]) -> Iterator[dict[str, Any]]:
        parallel = Parallel(n_jobs=self.n_jobs, backend=self.backend, return_as="generator_unordered",
                            pre_dispatch=self.pre_dispatch)
        return parallel(delayed(fn)(settings, task) for task in tasks)
