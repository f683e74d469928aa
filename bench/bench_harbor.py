"""Harbor task folders: what reading a folder of tasks costs (every task folder is hashed for its key,
the environment again for its image tag) on the first read and on the second read by the same
source (a run reads twice: scan, then dispatch; the second is served by the size/mtime signature),
and what a task's container costs when its image must be built vs when it is reused (open + exec +
close, as a ratio to a plain `sandbox.image` container).

    python bench/bench_harbor.py --tasks 200 --env-kb 1024 -n 10 --image hermes-exp-test/busybox:latest
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from hermes_exp.dataset.readers.harbor import HarborSource

TOML = "[verifier]\ntimeout_sec = 60\n[environment]\nbuild_timeout_sec = 120\n"


def write_tasks(root: Path, n: int, env_kb: int, image: str, nonce: str) -> Path:
    blob = os.urandom(env_kb * 1024)
    for i in range(n):
        task = root / f"task-{i:05d}"
        for sub in ("environment", "tests", "solution"):
            (task / sub).mkdir(parents=True)
        (task / "task.toml").write_text(TOML)
        (task / "instruction.md").write_text(f"Task {i}: write hello to /app/out.txt\n")
        (task / "environment" / "Dockerfile").write_text(f"FROM {image}\nLABEL bench.nonce={nonce}-{i}\nWORKDIR /app\n")
        (task / "environment" / "data.bin").write_bytes(blob)
        (task / "tests" / "test.sh").write_text("#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n")
        (task / "solution" / "solve.sh").write_text("#!/bin/sh\necho hello > /app/out.txt\n")
    return root


def time_reads(root: Path) -> tuple[float, float, int]:
    source = HarborSource(root)
    t0 = time.perf_counter()
    rows = [r.row for r in source.rows()]
    t1 = time.perf_counter()
    again = [r.row for r in source.rows()]
    t2 = time.perf_counter()
    assert rows == again and all(rows)
    return t1 - t0, t2 - t1, len(rows)


def time_containers(root: Path, n: int, image: str) -> dict[str, float]:
    """Medians (s) of open + exec + close: a plain image; a task's first open (its build); the next
    open in the same run (cached); the first open in another run (the engine has the tag)."""
    from hermes_exp.sandbox.docker import DockerSandboxFactory

    factory, later = (DockerSandboxFactory(image=image, run_id=f"bench-{os.getpid()}-{k}", base_dir=str(root))
                      for k in ("a", "b"))
    rows = [r.row for r in HarborSource(root).rows()][: n + 1]
    factory.preflight({image})
    timings: dict[str, list[float]] = {"plain": [], "build": [], "reuse": [], "next run": []}
    try:
        for i, row in enumerate(rows):
            for name, spec, f in (("plain", {}, factory), ("build", row, factory), ("reuse", row, factory),
                                  ("next run", row, later)):
                t0 = time.perf_counter()
                sandbox = f.open(f"v1:bench{i}{name}", spec)
                sandbox.exec("true", timeout=30)
                sandbox.close()
                if i:  # the first round warms the engine
                    timings[name].append(time.perf_counter() - t0)
    finally:
        factory.shutdown()
        later.shutdown()
        _remove_images(factory, root)
    return {k: statistics.median(v) for k, v in timings.items() if v}


def _remove_images(factory: Any, root: Path) -> None:
    from hermes_exp.sandbox.images import CONTEXT_LABEL

    api = factory._api()
    for row in (r.row for r in HarborSource(root).rows()):
        digest = row["container"]["build"]["digest"]
        for image in api.images(filters={"label": f"{CONTEXT_LABEL}={digest}"}):
            try:
                api.remove_image(image["Id"], force=True)
            except Exception:  # already gone
                pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--env-kb", type=int, default=1024, help="a data file of this size in each environment/")
    parser.add_argument("-n", type=int, default=10, help="container rounds (0: reading only)")
    parser.add_argument("--image", default=os.environ.get("HX_TEST_IMAGE", "hermes-exp-test/busybox:latest"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = write_tasks(Path(tmp) / "tasks", args.tasks, args.env_kb, args.image, uuid.uuid4().hex[:8])
        first, second, count = time_reads(root)
        print("| tasks | env KB | first read ms/task | second read ms/task | second/first |")
        print("| --- | --- | --- | --- | --- |")
        print(f"| {count} | {args.env_kb} | {first / count * 1e3:.2f} | {second / count * 1e3:.2f} | "
              f"{second / first:.2f} |")
        if args.n:
            med = time_containers(root, args.n, args.image)
            print("\n| container (open+exec+close) | median ms | / plain image |")
            print("| --- | --- | --- |")
            for name in ("plain", "build", "reuse", "next run"):
                print(f"| {name} | {med[name] * 1e3:.0f} | {med[name] / med['plain']:.2f} |")


if __name__ == "__main__":
    main()
