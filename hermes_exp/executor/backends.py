"""Parallel execution through joblib: results come back unordered, as they finish.

threads and processes run on this machine; dask and ray spread tasks over a cluster through
joblib's backends. In every case the parent process stays the ledger's only writer."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, ExitStack, nullcontext
from typing import Any, TypeVar

from joblib import Parallel, delayed, parallel_config

from hermes_exp.executor import ray_pool, thread_pool
from hermes_exp.settings.sections import Section
from hermes_exp.errors import ClusterError, ConfigError
from hermes_exp.optional import require

R = TypeVar("R")  # what the mapped function returns (a TaskResult, a Reverified)

BACKENDS = ("threading", "loky", "multiprocessing", "dask", "ray")  # joblib's, and the cluster ones below


class JoblibExecutor:
    """`backend` is a joblib backend: threading (default; run by thread_pool.py, joblib's own held
    ~8 KB per session) or loky (processes).

    Tasks are pulled lazily from the iterable (at most `pre_dispatch` ahead), so a dataset of any
    size streams through without being held in memory."""

    def __init__(self, backend: str = "threading", n_jobs: int = 4, pre_dispatch: str = "2*n_jobs",
                 **_: Any) -> None:
        section = Section("executor", {"backend": backend, "n_jobs": n_jobs})
        self.backend = section.choice("backend", BACKENDS, "threading")
        self.n_jobs = section.number("n_jobs", integer=True, positive=True, required=True,
                                     unit="concurrent sessions; default num_workers")
        self.pre_dispatch = pre_dispatch

    def cluster(self) -> AbstractContextManager[Any]:
        """Whatever must exist while tasks run (a cluster client); nothing for local backends."""
        return nullcontext()

    def processes(self, cluster: Any = None) -> int:
        """How many worker processes share the run's work (each builds its own client and rate limiter)."""
        return 1 if self.backend == "threading" else self.n_jobs

    def broker_bind(self) -> str | None:
        """The address of this host at which worker processes reach the run's budget broker
        (money/broker.py); None when the workers are this process's threads, which book directly."""
        return None if self.backend == "threading" else "127.0.0.1"

    def map_unordered(self, fn: Callable[..., R], settings: dict[str, Any],
                      tasks: Iterable[Any]) -> Iterator[R]:
        """fn(settings, task) for every task, with settings["invocation"]["processes"] set by the executor."""
        if self.backend == "threading":  # the same, on threads that hold no joblib objects per task
            yield from thread_pool.map_unordered(fn, with_processes(settings, 1), tasks, self.n_jobs,
                                                  _ahead(self.pre_dispatch, self.n_jobs))
            return
        with self.cluster() as cluster, parallel_config(backend=self.backend):
            settings = with_processes(settings, self.processes(cluster))
            parallel = Parallel(n_jobs=self.n_jobs, return_as="generator_unordered", **self.window())
            yield from parallel(delayed(fn)(settings, task) for task in tasks)

    def window(self) -> dict[str, Any]:
        """How far joblib reads ahead of the tasks running (its pre_dispatch and batch size)."""
        return {"pre_dispatch": self.pre_dispatch}


def _ahead(pre_dispatch: str | int, n_jobs: int) -> int:
    """joblib's pre_dispatch as a count: an int, "all", or an expression such as "2*n_jobs"."""
    if isinstance(pre_dispatch, int):
        return max(pre_dispatch, n_jobs)
    if pre_dispatch == "all":
        return 2**62
    factors = str(pre_dispatch).replace("n_jobs", str(n_jobs)).split("*")
    count = 1
    for factor in factors:
        count *= int(factor.strip())
    return max(count, n_jobs)


def with_processes(settings: dict[str, Any], processes: int) -> dict[str, Any]:
    return {**settings, "invocation": {**settings.get("invocation", {}), "processes": max(1, int(processes))}}


def _address(section: Section) -> str | None:
    address = section.raw.get("address")
    if address is None or (isinstance(address, str) and address.strip()):
        return address
    raise ConfigError(f"executor.address={address!r} must be a cluster address or null",
                      "set executor.address=tcp://host:8786 (dask) or auto (ray), or null for a local cluster")


def _broker_host(section: Section) -> str | None:
    host = section.raw.get("broker_host")
    if host is None or (isinstance(host, str) and host.strip() and not any(c in host for c in "/: ")):
        return host
    raise ConfigError(f"executor.broker_host={host!r} must be a host name or IPv4 address of this machine (no port), "
                      "or null", "set executor.broker_host=<an address of this host the cluster's workers can reach>, "
                      "or null to take the one on the route to executor.address")


def _towards(address: str) -> str:
    """This host's address on its route to a cluster `address` (tcp://host:port, host:port): the source
    address a UDP socket connected there takes (connecting one sends nothing)."""
    host = address.split("://")[-1].rsplit(":", 1)[0].strip("[]")
    try:
        target = socket.getaddrinfo(host, 9, type=socket.SOCK_DGRAM)[0]
        with socket.socket(target[0], socket.SOCK_DGRAM) as probe:
            probe.connect(target[4])
            return probe.getsockname()[0]
    except OSError as exc:
        raise ConfigError(f"executor.address={address!r}: no route from this host to {host!r} ({exc})",
                          "check the cluster's address, or set executor.broker_host=<this host's address>") from exc


def _missing(package: str, extra: str) -> ConfigError:
    return ConfigError(f"executor needs the {package!r} package, which is not installed",
                       f"pip install 'hermes-exp[{extra}]', or use executor=threads")


class DaskExecutor(JoblibExecutor):
    """Tasks on a Dask cluster: `address` of a scheduler, or a LocalCluster of `n_workers` processes."""

    def __init__(self, address: str | None = None, n_workers: int = 2, threads_per_worker: int = 8,
                 broker_host: str | None = None, **kwargs: Any) -> None:
        super().__init__(backend="dask", **kwargs)
        section = Section("executor", {"address": address, "n_workers": n_workers,
                                       "threads_per_worker": threads_per_worker, "broker_host": broker_host})
        self.address = _address(section)
        self.broker_host = _broker_host(section)
        self.n_workers = section.number("n_workers", integer=True, positive=True, required=True,
                                        unit="LocalCluster worker processes")
        self.threads_per_worker = section.number("threads_per_worker", integer=True, positive=True, required=True,
                                                 unit="sessions per worker process")

    def cluster(self) -> AbstractContextManager[Any]:
        distributed = require("dask.distributed", _missing("dask[distributed]", "dask"))
        Client, LocalCluster = distributed.Client, distributed.LocalCluster
        if self.address:
            return Client(self.address)
        stack = ExitStack()  # closed in reverse: the client, then the cluster and its worker processes
        local = stack.enter_context(LocalCluster(n_workers=self.n_workers, threads_per_worker=self.threads_per_worker,
                                                 processes=True, dashboard_address=None))
        client = stack.enter_context(Client(local))
        return _Holding(stack, client)

    def window(self) -> dict[str, Any]:
        """joblib's dask backend runs as many tasks as the cluster has threads, whatever n_jobs says (a
        LocalCluster of 2 x 8 ran 16 sessions for num_workers=3, and a big cluster hundreds): it only ever
        holds what was dispatched, so n_jobs tasks of one each are dispatched, and one more as each ends."""
        return {"pre_dispatch": self.n_jobs, "batch_size": 1}

    def broker_bind(self) -> str | None:
        """`broker_host`, or this host's address on its route to the scheduler (127.0.0.1 for a LocalCluster)."""
        return self.broker_host or (_towards(self.address) if self.address else "127.0.0.1")

    def processes(self, cluster: Any = None) -> int:
        """The cluster's worker processes when the run starts (a LocalCluster: `n_workers`)."""
        if cluster is None or not self.address:
            return self.n_workers
        return max(1, len(cluster.scheduler_info(n_workers=-1).get("workers") or {}))


class _Holding(AbstractContextManager):
    """`value` on entry; the stack closed on exit."""

    def __init__(self, stack: ExitStack, value: Any) -> None:
        self.stack, self.value = stack, value

    def __enter__(self) -> Any:
        return self.value

    def __exit__(self, *exc: Any) -> None:
        self.stack.close()


class RayExecutor(JoblibExecutor):
    """Tasks on a Ray cluster: `address` of a running cluster ("auto"), or a local one of `num_cpus`.

    Ray's joblib backend cannot return results as they finish, so this submits tasks itself, keeping
    `n_jobs` in flight (more would run at once: an actor runs as many as its threads allow) and taking
    whichever finishes first. They run in a fixed set of actors (one process each, `n_jobs` sessions
    spread over at most one actor per CPU), so the number of processes that share the rate limits
    is known, and stays that number for the whole run. Every actor books its calls in the parent's
    budget broker (money/broker.py), at `broker_bind()`."""

    def __init__(self, address: str | None = None, num_cpus: int | None = None, broker_host: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(backend="ray", **kwargs)
        section = Section("executor", {"address": address, "num_cpus": num_cpus, "broker_host": broker_host},
                          null="for the machine's")
        self.address = _address(section)
        self.broker_host = _broker_host(section)
        self.num_cpus = section.number("num_cpus", None, integer=True, positive=True, unit="CPUs of a local Ray")

    def map_unordered(self, fn: Callable[..., R], settings: dict[str, Any],
                      tasks: Iterable[Any]) -> Iterator[R]:
        ray = require("ray", _missing("ray", "ray"))
        started = not ray.is_initialized()
        if started:
            # "local", not None: None joins whatever cluster /tmp/ray/ray_current_cluster names
            # (another user's run, a stale `ray start`), with its code and its limits.
            ray.init(address=self.address or "local", num_cpus=self.num_cpus, include_dashboard=False,
                     log_to_driver=False, configure_logging=False)
        actors: list[Any] = []
        try:
            count = self.processes(ray)
            # one CPU each, spread: on the nodes that have CPUs, one per CPU (with none, every actor
            # would sit on the driver's node); at most `count` actors, so each can start
            host = ray.remote(num_cpus=1, scheduling_strategy="SPREAD",
                              max_concurrency=-(-self.n_jobs // count))(ray_pool.TaskHost)
            actors = [host.remote() for _ in range(count)]
            yield from ray_pool.map_unordered(ray, actors, fn, with_processes(settings, count), iter(tasks),
                                              window=self.n_jobs)
        finally:
            for actor in actors:
                ray.kill(actor)
            if started:
                ray.shutdown()

    def broker_bind(self) -> str | None:
        """`broker_host`, or this host's address on its route to the head (the node address Ray itself picks
        for this host when the head is here: `auto`); 127.0.0.1 for a local Ray."""
        if self.broker_host or not self.address:
            return self.broker_host or "127.0.0.1"
        if self.address == "auto":
            return require("ray", _missing("ray", "ray")).util.get_node_ip_address()
        return _towards(self.address)

    def processes(self, cluster: Any = None) -> int:
        """One actor process per free CPU of the cluster, at most one per session."""
        if cluster is None:
            return max(1, min(self.n_jobs, self.num_cpus or 1))
        cpus = int(cluster.available_resources().get("CPU", 0))
        if cpus < 1:  # an actor that cannot be placed would wait for ever
            raise ClusterError(f"the Ray cluster at executor.address={self.address} has no free CPU for this "
                               f"run's actors ({cluster.cluster_resources().get('CPU', 0)} in all)",
                               "start worker nodes with CPUs (`ray start --address=... --num-cpus=N`), or wait "
                               "for other jobs of the cluster to end")
        return min(self.n_jobs, cpus)
