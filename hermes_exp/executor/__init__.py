"""Where tasks run: joblib's backends (threads, processes, dask, ray).

- backends: Parallel execution through joblib: results come back unordered, as they finish
- ray_pool: The ray executor's actors: tasks to the least busy actor, results as they finish, and a task whose
  actor died (its node lost) run again on one still alive
- thread_pool: The threads executor's sessions (executor.py, backend=threading): up to `n_jobs` threads of
  this process, each taking the next task when it is free; results come back as they finish
"""
from __future__ import annotations

_BACKENDS = ("JoblibExecutor", "DaskExecutor", "RayExecutor")


def __getattr__(name: str):  # lazily: importing the package must not import joblib
    if name in _BACKENDS:
        from hermes_exp.executor import backends

        return getattr(backends, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
