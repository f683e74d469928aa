"""sandbox.max_starts_per_second: starts spaced 1/rate apart (a clock the test controls, so nothing
depends on this machine's speed), no cap at 0, a clear error for a bad value, no part of the identity;
and a real docker factory with the cap on opens and closes containers."""

from __future__ import annotations

import threading

import pytest

from hermes_exp.errors import ConfigError
from hermes_exp.sandbox.startrate import StartRate
from hermes_exp.settings.resolved import identity_hash


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []
        self.lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.slept.append(seconds)


def test_starts_are_spaced_by_the_rate() -> None:
    clock = FakeClock()
    rate = StartRate(4, clock=clock, sleep=clock.sleep)
    assert [rate.wait() for _ in range(4)] == [0.0, 0.25, 0.5, 0.75]  # a burst of 4 at one instant
    clock.now += 10  # a quiet while later: the next start goes at once
    assert rate.wait() == 0.0
    assert clock.slept == [0.25, 0.5, 0.75]


def test_concurrent_starts_each_get_their_own_slot() -> None:
    clock = FakeClock()
    rate = StartRate(10, clock=clock, sleep=clock.sleep)
    delays: list[float] = []
    threads = [threading.Thread(target=lambda: delays.append(rate.wait())) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(round(d, 6) for d in delays) == [round(i * 0.1, 6) for i in range(20)]


def test_zero_means_no_cap() -> None:
    clock = FakeClock()
    rate = StartRate(0, clock=clock, sleep=clock.sleep)
    assert [rate.wait() for _ in range(50)] == [0.0] * 50 and clock.slept == []


@pytest.mark.parametrize("bad", [-1, "fast", True, None])
def test_bad_values_name_the_key(bad) -> None:
    with pytest.raises(ConfigError) as err:
        StartRate(bad)
    assert "sandbox.max_starts_per_second" in str(err.value)


def test_the_cap_is_not_part_of_the_identity() -> None:
    base = {"sandbox": {"kind": "docker", "image": "x"}, "model": {"name": "m"}, "seed": 0}
    assert identity_hash(base) == identity_hash({**base, "sandbox": {**base["sandbox"], "max_starts_per_second": 5}})


@pytest.mark.docker
def test_docker_factory_with_a_start_cap_runs_containers() -> None:
    import uuid

    from hermes_exp.sandbox.docker import DockerSandboxFactory
    from tests.sandbox.conftest import IMAGE, require

    require("docker")
    factory = DockerSandboxFactory(image=IMAGE, pull_timeout=10, run_id=f"test-{uuid.uuid4().hex[:10]}",
                                   max_starts_per_second=50)
    try:
        boxes = [factory.open(f"v1:rate{i}", {}) for i in range(3)]
        assert [b.exec("echo ok", timeout=10).output.strip() for b in boxes] == ["ok"] * 3
        for box in boxes:
            box.close()
    finally:
        factory.shutdown()
