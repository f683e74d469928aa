"""Verification cost per sample on each sandbox backend: the time a `command` verifier adds to a sample
(copy the tests in, clear the reward dir, run `verify`, read the reward), with and without the workdir
archive taken before it (verifier.archive_on_error / keep_workdir), as a ratio to the sandbox's own
open + close; and the archive size per sample for a small project workdir.

usage: python bench/bench_verify.py [-n 20] [--backends local,bwrap,docker] [--image IMAGE] [--files 20]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sandbox import make_factory, shut_down  # noqa: E402

from hermes_exp.errors import SandboxError  # noqa: E402
from hermes_exp.verify.base import VerifyContext  # noqa: E402
from hermes_exp.verify.command import CommandVerifier  # noqa: E402
from hermes_exp.sandbox.files import put_files  # noqa: E402
from hermes_exp.verify.scoring import Plan, verify_in_sandbox  # noqa: E402

TEST_SH = "#!/bin/sh\ngrep -qx 42 answer.txt && test -f src/mod_0.py\n"


def project(files: int) -> dict[str, str]:
    """What an agent leaves behind: a small Python project (~2 kB per file, no two lines alike, so it
    compresses like code rather than like a repeated string) and its answer."""
    def body(n: int) -> str:
        return "".join(f"def f{n}_{i}(x):\n    return x * {i} + 0x{hashlib.blake2b(f'{n}.{i}'.encode(), digest_size=8).hexdigest()}\n"
                       for i in range(40))
    return {**{f"src/mod_{i}.py": body(i) for i in range(files)}, "answer.txt": "42\n"}


def plan(backend: str, archive: bool) -> Plan:
    cfg = {"kind": "command", "archive_on_error": archive, "keep_workdir": archive, "archive_max_mb": 50}
    return Plan(cfg, "vf1:bench", CommandVerifier(context=VerifyContext(in_container=backend == "docker")))


def time_backend(backend: str, n: int, image: str, files: int) -> dict[str, Any]:
    factory = make_factory(backend, image)
    if hasattr(factory, "preflight"):
        factory.preflight({image} if backend == "docker" else set())
    row = {"prompt": "bench", "tests": {"tests/test.sh": TEST_SH}, "verify": "sh tests/test.sh"}
    times: dict[str, list[float]] = {"open+close": [], "verify": [], "verify+archive": []}
    sizes: list[int] = []
    try:
        for i in range(n + 1):  # round 0 warms caches (images, page cache)
            for archive in (False, True):
                t0 = time.perf_counter()
                box = factory.open(f"v1:bench{i}{int(archive)}", {})
                t1 = time.perf_counter()
                put_files(box, project(files), ".")
                t2 = time.perf_counter()
                score, packed, note = verify_in_sandbox(plan(backend, archive), box, row, {"messages": []})
                t3 = time.perf_counter()
                box.close()
                t4 = time.perf_counter()
                if score.error or score.reward != 1.0:
                    raise SystemExit(f"{backend}: verification failed: {score.error or score.details}")
                if not i:
                    continue
                times["verify+archive" if archive else "verify"].append(t3 - t2)
                if archive:
                    sizes.append(len(packed or b""))
                else:
                    times["open+close"].append((t1 - t0) + (t4 - t3))
    finally:
        shut_down(factory)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {**med, "archive_bytes": statistics.median(sizes)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20)
    parser.add_argument("--backends", default="local,bwrap,docker")
    parser.add_argument("--image", default="hermes-exp-test/busybox:latest")
    parser.add_argument("--files", type=int, default=20, help="files in the simulated project workdir")
    args = parser.parse_args()
    print(f"median of {args.n} samples; workdir: {args.files} files of ~2 kB + answer.txt\n")
    print(f"{'backend':8} {'open+close ms':>14} {'verify ms':>10} {'+archive ms':>12} {'verify/open':>12} "
          f"{'archive/verify':>15} {'archive bytes':>14}")
    for backend in args.backends.split(","):
        try:
            m = time_backend(backend, args.n, args.image, args.files)
        except SandboxError as exc:
            print(f"{backend:8} unavailable: {exc}")
            continue
        ms = {k: 1000 * v for k, v in m.items() if k != "archive_bytes"}
        print(f"{backend:8} {ms['open+close']:14.1f} {ms['verify']:10.1f} {ms['verify+archive']:12.1f} "
              f"{m['verify'] / m['open+close']:12.2f} {m['verify+archive'] / m['verify']:15.2f} "
              f"{m['archive_bytes']:14.0f}")


if __name__ == "__main__":
    main()
