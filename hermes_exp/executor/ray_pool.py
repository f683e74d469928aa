"""The Ray executor's actors and the tasks each holds: a task goes to the least busy actor, results come
back as they finish, and a task whose actor died (its node lost, its raylet or process killed) runs again
on an actor that is still alive. The parent keeps every task until its result is in hand, so a lost node
loses only the work in flight on it, never a result that reached the parent."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from hermes_exp.errors import ClusterError

log = logging.getLogger(__name__)

RERUNS = 2  # how often one task may lose its actor before the run gives up on the cluster


class TaskHost:
    """A Ray actor: one worker process that runs tasks on its threads."""

    def run(self, fn: Callable[..., Any], settings: dict[str, Any], task: Any) -> Any:
        return fn(settings, task)


class _Pool:
    """The live actors, how many tasks each runs, and which actor holds which task."""

    def __init__(self, ray: Any, actors: list[Any], fn: Callable[..., Any], settings: dict[str, Any]) -> None:
        self.ray, self.actors, self.fn = ray, actors, fn
        self.shared = ray.put(settings)  # sent to the cluster once, not with every task
        self.load = dict.fromkeys(range(len(actors)), 0)  # live actors only
        self.held: dict[Any, tuple[int, Any, int]] = {}  # ref -> (actor, task, times it lost its actor)
        # what a dead actor's tasks raise: its process or node is gone, or so is the result it stored there
        self.lost_errors = (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError)

    def submit(self, task: Any, lost: int = 0) -> Any:
        index = min(self.load, key=self.load.__getitem__)  # the least busy actor
        self.load[index] += 1
        ref = self.actors[index].run.remote(self.fn, self.shared, task)
        self.held[ref] = (index, task, lost)
        return ref

    def take(self, ref: Any) -> tuple[bool, Any]:
        """(True, the result) of a finished task; (False, its new ref) when it lost its actor and was
        handed to another. Raises ClusterError when no actor is left, or the task lost too many."""
        index, task, lost = self.held.pop(ref)
        try:
            value = self.ray.get(ref)
        except self.lost_errors as exc:
            self._drop(index, exc)
            if lost >= RERUNS:
                raise ClusterError(f"a task lost its Ray actor {lost + 1} times (last: {_first_line(exc)})",
                                   _RESUME) from None
            return False, self.submit(task, lost + 1)
        self.load[index] -= 1
        return True, value

    def _drop(self, index: int, exc: BaseException) -> None:
        if self.load.pop(index, None) is None:
            return  # another of its tasks already told
        log.warning("a Ray actor of this run died (%s); its tasks in flight run again on the %d left",
                    _first_line(exc), len(self.load))
        if not self.load:
            raise ClusterError(f"every Ray actor of this run died (last: {_first_line(exc)})", _RESUME)


_RESUME = ("finished tasks are saved in the ledger; check the cluster (`ray status`), then run the same "
           "command again to run the rest")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def map_unordered(ray: Any, actors: list[Any], fn: Callable[..., Any], settings: dict[str, Any],
                  tasks: Iterator[Any], window: int) -> Iterator[Any]:
    """fn(settings, task) for every task on `actors`, `window` tasks in flight; results as they finish."""
    pool = _Pool(ray, actors, fn, settings)
    # range first: zip stops on it without pulling (and losing) one more task
    in_flight = [pool.submit(task) for _, task in zip(range(window), tasks)]
    while in_flight:
        done, in_flight = ray.wait(in_flight, num_returns=1)
        finished, value = pool.take(done[0])
        if not finished:
            in_flight.append(value)
            continue
        yield value
        for task in tasks:
            in_flight.append(pool.submit(task))
            break
