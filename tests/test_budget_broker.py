"""One budget for every process and host (money/broker.py): the parent serves the run's budget and keeps the
spend journal; worker processes book each call there over an authenticated socket. Real processes, a real
socket, the real CLI with the mock model on every executor, a kill -9 and a resume."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import request_count, run_cli, write_dataset
from node_mounts import own_tmp
from test_budget import PRICED
from test_budget_money import served_cost, worst_call

from hermes_exp.errors import BudgetExhausted, ConfigError, ProviderError
from hermes_exp.executor.backends import DaskExecutor
from hermes_exp.mock.server import MockServer
from hermes_exp.money.broker import BrokerClient, serve
from hermes_exp.money.journal import unaccounted
from hermes_exp.money.sweep_budget import SweepBudgetExhausted

# A worker process: books $0.30 calls that cost $0.25 until the broker refuses; prints how many it made.
WORKER = """
import json, sys, time
from hermes_exp.errors import BudgetExhausted
from hermes_exp.money.broker import BrokerClient
client, made = BrokerClient(json.loads(sys.argv[1])), 0
while True:
    try:
        ticket = client.reserve(0.30, "task-" + sys.argv[2])
    except BudgetExhausted as exc:
        print(made, exc)
        break
    time.sleep(0.1)  # the call: long enough for the other processes to start booking meanwhile
    client.settle(ticket, 0.25)
    made += 1
"""


def _settings(run_dir: Path, **budget: float) -> dict:
    run_dir.mkdir(parents=True, exist_ok=True)
    return {"run_dir": str(run_dir), "run_name": run_dir.name, "budget": budget,
            "invocation": {"id": 7, "spent_usd": 1.0}}


def test_worker_processes_book_in_one_budget_and_the_parent_journals_every_call(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    settings, broker = serve(_settings(run_dir, max_cost_usd=5.0), "127.0.0.1", 5.0)
    assert broker is not None and settings["invocation"]["broker"]["port"] > 0
    address = json.dumps(settings["invocation"]["broker"])
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, address, str(i)], stdout=subprocess.PIPE, text=True)
               for i in range(3)]
    said = [w.communicate(timeout=60)[0] for w in workers]
    broker.close()
    made = sum(int(line.split()[0]) for line in said)
    # $1 spent before; $0.25 a call, each reserved at $0.30: the three together stop within one call of $5
    assert 1.0 + made * 0.25 <= 5.0 and 1.0 + made * 0.25 + 0.30 > 5.0 - 0.30, said
    assert all("budget.max_cost_usd=5.0" in line for line in said)  # the parent's words, not a process's share
    totals, files = unaccounted(run_dir / "spend")  # the parent's journal, not the workers'
    assert len(files) == 1 and sum(totals.values()) == pytest.approx(made * 0.25)
    assert {key for key, invocation in totals} == {f"task-{i}" for i, line in enumerate(said) if line[0] != "0"}


def test_a_wrong_key_or_a_closed_broker_makes_no_call(tmp_path: Path) -> None:
    settings, broker = serve(_settings(tmp_path / "run", max_cost_usd=5.0), "127.0.0.1", 5.0)
    address = settings["invocation"]["broker"]
    with pytest.raises(ProviderError) as wrong:
        BrokerClient({**address, "key": os.urandom(32).hex()}).reserve(0.1, "k")
    assert f"budget broker at 127.0.0.1:{address['port']} cannot be reached" in str(wrong.value)
    client = BrokerClient(address)
    client.settle(client.reserve(0.1, "k"), 0.05)
    broker.close()
    with pytest.raises(ProviderError) as closed:
        client.reserve(0.1, "k")
    assert closed.value.transient and "executor.broker_host" in str(closed.value)
    assert broker.booking.budget.spent == pytest.approx(1.05)


def test_a_worker_killed_mid_call_counts_at_its_worst_case_and_frees_those_waiting(tmp_path: Path) -> None:
    """A node or process killed with a call in flight never settles it: its reservation counts as spent
    (the call may have been billed) and a call waiting for that room is answered, not left hanging."""
    settings, broker = serve(_settings(tmp_path / "run", max_cost_usd=2.0), "127.0.0.1", 2.0)  # $1 spent before
    address = json.dumps(settings["invocation"]["broker"])
    holder = subprocess.Popen([sys.executable, "-c", "import json, sys, time\n"
                               "from hermes_exp.money.broker import BrokerClient\n"
                               "client = BrokerClient(json.loads(sys.argv[1]))\n"
                               "client.reserve(0.6, 'held'); print('held', flush=True)\n"
                               "time.sleep(600)", address], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    waiting: list[BaseException] = []
    thread = threading.Thread(target=lambda: _refused(BrokerClient(settings["invocation"]["broker"]), waiting))
    thread.start()
    time.sleep(0.5)
    assert thread.is_alive(), waiting  # $1 + $0.6 held + $0.6 would pass $2: it waits for the call in flight
    holder.kill()
    holder.wait()
    thread.join(timeout=10)
    broker.close()
    assert not thread.is_alive() and isinstance(waiting[0], BudgetExhausted)
    assert "$1.600000 spent of budget.max_cost_usd=2.0" in str(waiting[0])
    totals, _ = unaccounted(tmp_path / "run" / "spend")
    assert totals == {("held", 7): 0.6}  # the next invocation folds it in at its worst case too


def _refused(client: BrokerClient, caught: list[BaseException]) -> None:
    try:
        client.reserve(0.6, "waits")
    except ProviderError as exc:  # BudgetExhausted is one
        caught.append(exc)


def test_closing_the_broker_ends_its_threads_with_a_call_still_waiting(tmp_path: Path) -> None:
    settings, broker = serve(_settings(tmp_path / "run", max_cost_usd=2.0), "127.0.0.1", 2.0)
    holder = BrokerClient(settings["invocation"]["broker"])
    holder.reserve(0.6, "held")
    waiting: list[BaseException] = []
    thread = threading.Thread(target=lambda: _refused(BrokerClient(settings["invocation"]["broker"]), waiting))
    thread.start()
    time.sleep(0.3)
    broker.close()
    thread.join(timeout=10)
    assert not thread.is_alive() and "cannot be reached" in str(waiting[0])
    deadline = time.monotonic() + 10
    while any(t.name.startswith("hx-broker") for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [t.name for t in threading.enumerate() if t.name.startswith("hx-broker")]


def test_the_sweep_budget_is_booked_by_the_parent_too(tmp_path: Path) -> None:
    """A worker on a node that cannot see the sweep directory is refused by the sweep's budget all the same."""
    settings, broker = serve(_settings(tmp_path / "run", sweep_max_cost_usd=0.5), "127.0.0.1", None)
    client = BrokerClient(settings["invocation"]["broker"])
    client.settle(client.reserve(0.3, "k"), 0.3)
    with pytest.raises(SweepBudgetExhausted) as refused:
        client.reserve(0.3, "k")
    broker.close()
    assert "budget.sweep_max_cost_usd=0.5" in str(refused.value)
    assert list((tmp_path / "run" / "sweep_budget").glob("*.jsonl"))  # written by this (the parent's) process


def test_a_broker_host_that_is_not_this_hosts_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        serve(_settings(tmp_path / "run", max_cost_usd=5.0), "192.0.2.77", 5.0)  # TEST-NET: no host's address
    assert "cannot listen on '192.0.2.77'" in err.value.message and "executor.broker_host" in err.value.hint


def test_no_broker_for_threads_or_a_run_without_a_budget(tmp_path: Path) -> None:
    plain = _settings(tmp_path / "run")
    assert serve(plain, None, 5.0) == (plain, None)
    assert serve(plain, "127.0.0.1", None) == (plain, None)


NOTES = "Summarise these notes and keep every number. " * 270  # ~$3 a call at PRICED: the prompt dominates


@pytest.mark.slow
def test_one_task_may_spend_more_than_a_processs_share(tmp_path: Path, mock_server) -> None:
    """The budget is one, not split: with two worker processes, one task may use ~80% of it (an equal split
    gave each process half and stopped this run with exit 4)."""
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"{NOTES}\nLOOP"}, {"prompt": "RUN: echo hi"}])
    result = run_cli(tmp_path, f"dataset.path={data}", "run_name=one", "executor=processes", "num_workers=2",
                     "max_turns=4", "filters=none", "distribution=terminal_only", "distribution.toolsets.file=0",
                     "sandbox=local", *PRICED, "budget.max_cost_usd=16", f"model.base_url={mock_server.base_url}")
    assert result.returncode == 0, result.stderr[-3000:]
    stats = json.loads((tmp_path / "outputs" / "one" / "statistics.json").read_text())
    assert 8.0 < stats["spent_usd"] <= 16.0, stats


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["threads", "processes", "dask", "ray"])
def test_kill_9_then_a_resume_stopped_by_the_budget_stays_under_it(tmp_path: Path, executor: str) -> None:
    """Killed mid-run, then resumed until the budget stops it: what the mock served (what a provider would
    bill) stays under the limit, and the ledger counts at least that much."""
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"{NOTES}{i}\nLOOP"} for i in range(24)])
    # ~$3 a call, reserved at ~$5: the kill leaves ~$20 spent or in flight, the resume ~5 calls; 96 would be needed
    record, limit = tmp_path / "r.jsonl", 40.0
    args = [f"dataset.path={data}", "run_name=k9", f"executor={executor}", "num_workers=2", "max_turns=4",
            "filters=none", "distribution=terminal_only", "distribution.toolsets.file=0", "sandbox=local", *PRICED,
            f"budget.max_cost_usd={limit}"]
    with MockServer(latency_ms=400, record_path=str(record)) as server:
        args.append(f"model.base_url={server.base_url}")
        _kill_after(args, tmp_path, record, calls=3)
        assert served_cost(record) > 0
        killed = request_count(record)
        resumed = run_cli(tmp_path, *args, timeout=400)
        time.sleep(0.5)  # calls the kill tore are answered, and billed, all the same
        served = served_cost(record)
    assert request_count(record) > killed + 2, resumed.stderr[-3000:]  # the resumed run made calls of its own
    assert resumed.returncode == 4 and "budget reached" in resumed.stderr, resumed.stderr[-3000:]
    assert "share" not in resumed.stderr  # the run's one budget stopped it, not a process's part of it
    worst = worst_call(resumed.stderr)
    stats = json.loads((tmp_path / "outputs" / "k9" / "statistics.json").read_text())
    assert served <= limit + 1e-6, (served, resumed.stderr[-2000:])  # within the promise of + one call per session
    assert stats["spent_usd"] >= served - 1e-9  # calls torn by the kill count at their worst case
    assert stats["spent_usd"] > limit - worst  # one budget: it stopped at the limit, not at a process's share


def _kill_after(args: list[str], cwd: Path, record: Path, calls: int) -> None:
    """Start the run, kill -9 its whole process group once `calls` model calls were served."""
    proc = subprocess.Popen([sys.executable, "-m", "hermes_exp.cli", *args], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 180
    while request_count(record) < calls and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)



@pytest.mark.slow
def test_cluster_workers_that_cannot_see_the_run_directory_book_through_the_broker(tmp_path: Path) -> None:
    """A Dask scheduler on this host's network address and a worker in a mount namespace of its own, with
    a tmpfs over /tmp (the run directory and the parent's /tmp are not there): the broker listens on the
    address that routes to the scheduler, the worker books every call through it, and the budget holds."""
    host = _outward_address()
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"]).returncode != 0:
        pytest.skip("unshare -m (a mount namespace, root) is not available here: no worker without the run directory")
    port = _free_port(host)
    dask = str(Path(sys.executable).parent / "dask")
    data = write_dataset(tmp_path / "p.jsonl", [{"prompt": f"{NOTES}{i}\nLOOP"} for i in range(12)])
    record, limit = tmp_path / "r.jsonl", 40.0  # ~12 calls: three tasks of four calls each, of the 48 needed
    hidden = own_tmp() + " && cd / && exec " + f"{dask} worker tcp://{host}:{port} --nthreads 4 --no-nanny"
    with _started([dask, "scheduler", "--host", host, "--port", str(port), "--no-dashboard"]), \
            _started(["unshare", "-m", "sh", "-c", hidden]), MockServer(latency_ms=100, record_path=str(record)) as server:
        result = run_cli(tmp_path, f"dataset.path={data}", "run_name=far", "executor=dask",
                         f"executor.address=tcp://{host}:{port}", "num_workers=2", "max_turns=4", "filters=none",
                         "distribution=terminal_only", "distribution.toolsets.file=0", "sandbox=local", *PRICED,
                         f"budget.max_cost_usd={limit}", f"model.base_url={server.base_url}", timeout=300)
        time.sleep(0.5)
        served = served_cost(record)
    assert result.returncode == 4 and "budget reached" in result.stderr, result.stderr[-3000:]
    assert "share" not in result.stderr  # the parent's budget refused the worker's call, not a share of its own
    assert DaskExecutor(address=f"tcp://{host}:{port}", n_jobs=2).broker_bind() == host  # not 127.0.0.1
    stats = json.loads((tmp_path / "outputs" / "far" / "statistics.json").read_text())
    assert limit - worst_call(result.stderr) < stats["spent_usd"] and served <= limit + 1e-6, (served, stats)
    assert stats["kept"] >= 1  # tasks ran on the worker, their results reached the parent's ledger


def _outward_address() -> str:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # TEST-NET: connecting a UDP socket sends nothing
            address = probe.getsockname()[0]
    except OSError:
        address = "127.0.0.1"
    if address.startswith("127."):
        pytest.skip("this host has no network address but loopback: no cluster address to route to")
    return address


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def _started(command: list[str]) -> Iterator[None]:
    """A process for the length of the block, in a process group of its own (ended with it)."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        time.sleep(3)  # the scheduler listens, the worker joins (the run waits for workers all the same)
        yield
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
