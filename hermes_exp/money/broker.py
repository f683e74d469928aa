"""One budget for every process and host: the parent serves its booking (the run's budget, the sweep's, and
the spend journal, next to the ledger) to the run's worker processes, on this machine or on a cluster's
nodes, which reserve and settle every model call through it.

The wire is the standard library's multiprocessing.connection: a TCP socket on the parent (127.0.0.1
unless the workers are on other hosts), each connection authenticated by HMAC with a key made for this
dispatch and handed to the workers with their settings (never written to disk). One mechanism for loky,
Dask and Ray alike: a Ray actor or a Dask actor would hold the budget on some node, not where the ledger
and its journal are, and a Dask semaphore counts leases, not dollars."""

from __future__ import annotations

import logging
import os
import socket
import threading
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

from hermes_exp.errors import BudgetExhausted, ConfigError, ProviderError
from hermes_exp.money.booking import Booking, Ticket
from hermes_exp.money.sweep_budget import SweepBudgetExhausted
from hermes_exp.stops import RunStop

log = logging.getLogger(__name__)


class Broker:
    """The parent's side: `booking` served on `host` (a free port) until `close`. A connection is served
    on a thread of its own, so a reservation that waits for room never holds up another's settling."""

    def __init__(self, booking: Booking, host: str) -> None:
        self.booking = booking
        self._key = os.urandom(32)
        self._listener = Listener((host, 0), backlog=128, authkey=self._key)  # many sessions connect at once
        self._connections: set[Connection] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name="hx-broker", daemon=True).start()

    def address(self) -> dict[str, Any]:
        """What a worker needs to book here: it travels in settings["invocation"]["broker"]."""
        host, port = self._listener.address
        return {"host": host, "port": port, "key": self._key.hex()}

    def _accept(self) -> None:
        while not self._closed:
            try:
                connection = self._listener.accept()
            except (OSError, EOFError, AuthenticationError) as exc:  # a failed handshake, or the listener closed
                if not self._closed:
                    log.warning("the budget broker refused a connection: %s", exc)
                continue
            with self._lock:
                if self._closed:
                    connection.close()
                    return
                self._connections.add(connection)
            threading.Thread(target=self._serve, args=(connection,), name="hx-broker-conn", daemon=True).start()

    def _serve(self, connection: Connection) -> None:
        held: list[Ticket] = []  # this connection's calls reserved and not settled
        try:
            while True:
                connection.send(self._answer(connection.recv(), held))
        except (EOFError, OSError):  # the worker went away, or the broker closed
            pass
        finally:
            with self._lock:
                self._connections.discard(connection)
            connection.close()
            self._drop(held)

    def _drop(self, held: list[Ticket]) -> None:
        """A worker gone mid-call (its process or node killed): its calls may have been billed, so each
        counts at its worst case, and calls waiting for the room it held get it back or are refused."""
        for reserved, _ in held:
            self.booking.budget.settle(reserved, reserved)  # the journal keeps the call open: the fold agrees

    def _answer(self, request: tuple[Any, ...], held: list[Ticket]) -> tuple[Any, ...]:
        try:
            if request[0] == "reserve":
                held.append(self.booking.reserve(float(request[1]), request[2]))
                return "ok", held[-1]
            if request[0] == "settle":
                ticket = tuple(request[1])
                self.booking.settle(ticket, float(request[2]))
                if ticket in held:
                    held.remove(ticket)
                return "ok", None
            return "failed", f"unknown request {request[0]!r}"
        except BudgetExhausted as exc:
            return "refused", exc.stop_run, str(exc)
        except Exception as exc:  # noqa: BLE001 - the worker's call fails with it, the broker keeps serving
            return "failed", f"{type(exc).__name__}: {exc}"

    def close(self) -> None:
        """No more bookings: the listener and every connection closed, the journal kept for the parent's fold."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            connections, self._connections = list(self._connections), set()
        host, port = self._listener.address
        try:  # wakes the accepting thread (closing a listening socket does not, on Linux)
            socket.create_connection((host, port), timeout=2).close()
        except OSError:
            pass
        self._listener.close()
        for connection in connections:
            _hang_up(connection)
        self.booking.close()


def _hang_up(connection: Connection) -> None:
    """End a connection another thread is reading: shut its socket down (that thread reads the end of it
    and closes it; closing it from here would pull the handle from under that read)."""
    try:
        with socket.fromfd(connection.fileno(), socket.AF_INET, socket.SOCK_STREAM) as duplicate:
            duplicate.shutdown(socket.SHUT_RDWR)
    except OSError:  # closed already by its own thread
        pass


class BrokerClient:
    """A worker process's booking: each call reserved and settled in the parent's broker, on a connection
    per thread (a reservation may wait there for room while this process's other calls settle)."""

    def __init__(self, address: dict[str, Any]) -> None:
        self.host, self.port = str(address["host"]), int(address["port"])
        self._key = bytes.fromhex(address["key"])
        self._local = threading.local()

    def reserve(self, worst: float, key: str | None) -> Ticket:
        answer = self._ask(("reserve", worst, key))
        if answer[0] == "ok":
            return tuple(answer[1])
        if answer[0] == "refused":
            raise (SweepBudgetExhausted if answer[1] == RunStop.SWEEP_BUDGET else BudgetExhausted)(answer[2])
        raise ProviderError(f"the run's budget broker could not book a call: {answer[1]}", transient=True)

    def settle(self, ticket: Ticket, actual: float) -> None:
        try:
            self._ask(("settle", ticket, actual))
        except ProviderError as exc:  # the parent's journal holds the call at its worst case
            log.warning("%s", exc)

    def discard(self) -> None:
        """Nothing to discard here: the journal is the parent's."""

    def close(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None

    def _ask(self, request: tuple[Any, ...]) -> tuple[Any, ...]:
        try:
            connection = getattr(self._local, "connection", None)
            if connection is None:
                connection = self._local.connection = Client((self.host, self.port), authkey=self._key)
            connection.send(request)
            return connection.recv()
        except (OSError, EOFError, AuthenticationError) as exc:  # refused, reset, closed, a wrong key
            self._local.connection = None
            raise ProviderError(
                f"the run's budget broker at {self.host}:{self.port} cannot be reached from {socket.gethostname()} "
                f"({type(exc).__name__}: {exc}): no model call is made without it. The run's process holds it; "
                "if it is still running, this host cannot reach that address (set executor.broker_host to an "
                "address of the run's host that the workers can reach)", transient=True) from exc


def booking_for(settings: dict[str, Any], limit: float | None) -> Booking | BrokerClient:
    """A process's booking: the parent's broker when it serves one to this run's workers, else its own."""
    address = (settings.get("invocation") or {}).get("broker")
    return BrokerClient(address) if address else Booking.for_run(settings, limit)


def serve(settings: dict[str, Any], host: str | None, limit: float | None) -> tuple[dict[str, Any], Broker | None]:
    """The settings that send workers to a broker started on `host`, and the broker; as they were (and
    none) when the workers are this process's threads (`host` None) or the run has no budget to share."""
    sweep = (settings.get("budget") or {}).get("sweep_max_cost_usd")
    if host is None or (limit is None and sweep is None):
        return settings, None
    try:
        broker = Broker(Booking.for_run(settings, limit), host)
    except OSError as exc:  # not an address of this host, or none free
        raise ConfigError(f"the run's budget broker cannot listen on {host!r}: {exc}",
                          "set executor.broker_host to an address of this host that the workers can reach, or "
                          "null for the one on the route to executor.address") from exc
    invocation = {**settings.get("invocation", {}), "broker": broker.address()}
    return {**settings, "invocation": invocation}, broker
