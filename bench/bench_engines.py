"""Each container engine's and OCI runtime's cost per prompt for `sandbox=docker`: the same prompt's
sandbox work (open, an exec, write_file, read_file, a grep exec, close) done `--prompts` times one after
another straight through `DockerSandboxFactory`, on Docker's dockerd (DOCKER_HOST) with runc and crun,
and on private engines of its own (tests/sandbox/engines.py: Podman rootful and rootless, a dockerd
with gVisor's runsc), each started here and stopped after. Prints the median milliseconds per prompt
and per step, and this process's CPU per prompt. Needs root and the test images (.ci/setup-sandboxes.sh).

usage: python bench/bench_engines.py [--prompts 20] [--engines docker,docker+crun,podman,podman-rootless,runsc]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hermes_exp.sandbox.docker import DockerSandboxFactory  # noqa: E402
from tests.sandbox import engines  # noqa: E402
from tests.sandbox.conftest import IMAGE  # noqa: E402

STEPS = ("open", "exec", "write", "read", "grep", "close")


def one_prompt(factory: DockerSandboxFactory, i: int) -> dict[str, float]:
    times: dict[str, float] = {}
    t = time.perf_counter()

    def lap(step: str) -> None:
        nonlocal t
        now = time.perf_counter()
        times[step], t = (now - t) * 1000, now

    sb = factory.open(f"v1:bench-{i}", {})
    lap("open")
    sb.exec("echo hello; ls /", timeout=30)
    lap("exec")
    sb.write_file("notes.txt", b"line one\nline two\n")
    lap("write")
    sb.read_file("notes.txt")
    lap("read")
    sb.exec("grep -n two notes.txt", timeout=30)
    lap("grep")
    sb.close()
    lap("close")
    return times


def measure(name: str, settings: dict[str, Any], prompts: int) -> dict[str, float]:
    factory = DockerSandboxFactory(run_id=f"bench-{name.replace('+', '-')}-{os.getpid()}", image=IMAGE,
                                   remove_in_background=False, **settings)
    try:
        factory.preflight({IMAGE})
        one_prompt(factory, -1)  # warm: the first open pays for the engine's caches
        cpu0, rows = time.process_time(), [one_prompt(factory, i) for i in range(prompts)]
        cpu = (time.process_time() - cpu0) * 1000 / prompts
    finally:
        factory.shutdown()
    result = {step: statistics.median(r[step] for r in rows) for step in STEPS}
    result["total"] = statistics.median(sum(r.values()) for r in rows)
    result["cpu"] = cpu
    return result


def engine_settings(name: str) -> tuple[dict[str, Any], Any]:
    if name == "docker":
        return {}, None
    if name == "docker+crun":
        return {"runtime": "crun"}, None
    engine = engines.start(name)
    if isinstance(engine, str):
        raise SystemExit(f"{name}: {engine}")
    return engine.settings(), engine


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument("--engines", default="docker,docker+crun,podman,podman-rootless,runsc")
    args = parser.parse_args()
    print(f"| engine | ms/prompt | {' | '.join(STEPS)} | runner CPU ms/prompt |")
    print("|---|--:|" + "--:|" * len(STEPS) + "--:|")
    for name in args.engines.split(","):
        settings, engine = engine_settings(name)
        try:
            r = measure(name, settings, args.prompts)
        finally:
            if engine:
                engine.stop()
        print(f"| {name} | {r['total']:.0f} | {' | '.join(f'{r[s]:.0f}' for s in STEPS)} | {r['cpu']:.1f} |",
              flush=True)


if __name__ == "__main__":
    main()
