"""bwrap's memory limit holds for the sandbox as a whole (a cgroup v1 memory group), not per process,
and /tmp (a tmpfs inside the sandbox) is capped too: real processes, a real cgroup, a real tmpfs."""

from __future__ import annotations

import pytest

from hermes_exp.sandbox.bwrap import MEMORY_CGROUP_ROOT, BwrapSandboxFactory
from tests.sandbox.conftest import require

pytestmark = pytest.mark.bwrap

HOLD = "python3 -c 'import time; b = b\"x\" * (60 << 20); time.sleep(3)'"


@pytest.fixture
def sandbox_128mb():
    require("bwrap")
    if not (MEMORY_CGROUP_ROOT / "memory.limit_in_bytes").exists():
        pytest.skip("no cgroup v1 memory hierarchy here")
    factory = BwrapSandboxFactory(memory_mb=128, cpu_seconds=30, pids_limit=64, run_id="test-memcg")
    sb = factory.open("v1:memcg", {})
    yield sb
    sb.close()
    factory.shutdown()


def test_processes_together_cannot_pass_the_memory_limit(sandbox_128mb) -> None:
    alone = sandbox_128mb.exec(f"{HOLD}; echo rc=$?", timeout=60)
    assert "rc=0" in alone.output, alone.output  # one 60 MB process fits in 128 MB
    together = sandbox_128mb.exec(f"for i in 1 2 3 4; do ({HOLD}; echo rc=$?) & done; wait", timeout=60)
    codes = [line for line in together.output.split() if line.startswith("rc=")]
    assert len(codes) == 4 and codes.count("rc=0") < 4, together.output  # 240 MB in all: some are killed


def test_tmp_is_capped(sandbox_128mb) -> None:
    result = sandbox_128mb.exec("dd if=/dev/zero of=/tmp/fill bs=1M count=400 2>&1; echo rc=$?", timeout=60)
    assert "No space left on device" in result.output and "rc=0" not in result.output, result.output


def test_the_memory_group_goes_with_the_sandbox() -> None:
    require("bwrap")
    factory = BwrapSandboxFactory(memory_mb=64, run_id="test-memcg-gone")
    sb = factory.open("v1:gone", {})
    groups = list((MEMORY_CGROUP_ROOT / "hermes-exp").glob(f"{sb.root.name}"))
    assert groups and (groups[0] / "memory.limit_in_bytes").read_text().strip() == str(64 << 20)
    sb.exec("true", timeout=10)
    sb.close()
    assert not groups[0].exists()
