"""Where the runner's memory goes at N concurrent sessions: the real CLI against the external mock, with a
monitor thread inside the runner that samples VmRSS against the live thread count and, once every session
is in flight, writes /proc/self/smaps grouped by kind (thread stacks, glibc arenas, [heap], other anonymous,
files), glibc's malloc_stats and CPython's _debugmallocstats to --out.

usage: python bench/probe_memory.py [-n 1024] [--latency-ms 3000] [--python VENV/bin/python] [--out probe.txt]
       [--env NAME=VALUE ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import mock_server, write_prompts

MONITOR = r"""
import ctypes, os, runpy, sys, threading, time
try:  # as the hermes-exp command starts (bench/harness.py's WRAPPER does the same)
    from hermes_exp.launch import reexec
except ImportError:
    reexec = None
if reexec is not None:
    reexec()
OUT, N = os.environ["HX_PROBE_OUT"], int(os.environ["HX_PROBE_N"])
def _status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1])
def _smaps():
    maps, cur = [], None
    for line in open("/proc/self/smaps"):
        head = line.split()
        if "-" in head[0] and not head[0].endswith(":"):
            lo, hi = (int(x, 16) for x in head[0].split("-"))
            cur = {"size": (hi - lo) // 1024, "perm": head[1], "name": head[5] if len(head) > 5 else "", "rss": 0}
            maps.append(cur)
        elif head[0] == "Rss:":
            cur["rss"] = int(head[1])
    groups = {}
    for i, m in enumerate(maps):
        nxt = maps[i + 1] if i + 1 < len(maps) else None
        prev = maps[i - 1] if i else None
        if m["name"]:
            kind = m["name"] if m["name"].startswith("[") else "file-backed"
        elif m["size"] == 8192 and prev and prev["perm"] == "---p" and prev["size"] == 4:
            kind = "thread stack (8 MB)"
        elif m["perm"] == "---p":
            kind = "reserved (---p)"
        elif nxt and nxt["perm"] == "---p" and (m["size"] + nxt["size"]) % 65536 == 0:
            kind = "glibc arena heap"
        else:
            kind = "other anonymous"
        g = groups.setdefault(kind, [0, 0, 0])
        g[0] += 1; g[1] += m["size"]; g[2] += m["rss"]
    return groups
def _dump(samples, out=OUT):
    libc = ctypes.CDLL(None)
    with open(out, "w") as fh:
        fh.write("samples (threads, VmRSS kB):\n")
        for s in samples:
            fh.write(f"  {s[0]:.1f}s threads={s[1]} rss={s[2]} in_flight={s[3] if len(s) > 3 else ''}\n")
        fh.write(f"at dump: threads={threading.active_count()} VmRSS={_status('VmRSS:')} kB VmHWM={_status('VmHWM:')} kB\n")
        fh.write("smaps by kind (count, size kB, rss kB):\n")
        for kind, (c, size, rss) in sorted(_smaps().items(), key=lambda kv: -kv[1][2]):
            fh.write(f"  {kind:28s} {c:6d} {size:10d} {rss:8d}\n")
        fh.flush()
        saved = os.dup(2); os.dup2(fh.fileno(), 2)
        try:
            libc.malloc_stats(); sys._debugmallocstats()
        finally:
            os.dup2(saved, 2); os.close(saved)
def _watch():
    t0, samples, dumped, peak = time.time(), [], False, 0
    while True:
        n, rss = threading.active_count(), _status("VmRSS:")
        worker = sys.modules.get("hermes_exp.worker.task")
        samples.append((time.time() - t0, n, rss, getattr(worker, "_in_flight", None)))
        if n >= N and not dumped:
            time.sleep(float(os.environ.get("HX_PROBE_SETTLE", "1.0")))
            samples.append((time.time() - t0, threading.active_count(), _status("VmRSS:"), None))
            _dump(samples[::max(1, len(samples) // 40)] + samples[-1:]); dumped = True
        elif dumped and rss > peak + 2048:
            peak = rss
            _dump(samples[::max(1, len(samples) // 40)] + samples[-1:], OUT + ".peak")
        time.sleep(0.1)
def _trace_one(pattern):
    # one snapshot once every session is in flight, only the allocations made at lines of `pattern`
    import tracemalloc
    while getattr(sys.modules.get("hermes_exp.worker.task"), "_in_flight", 0) < N:
        time.sleep(0.2)
    time.sleep(2)
    snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, pattern)])
    with open(OUT + ".trace", "w") as fh:
        for stat in snap.statistics("traceback")[:15]:
            fh.write(f"{stat.size / 2**10:9.0f} KiB {stat.count:8d}\n")
            for frame in list(stat.traceback)[::-1]:
                fh.write(f"{'':27s}{frame}\n")
def _trace():
    # the largest traced total seen, as the top allocation sites at that moment (1 frame: more is too slow)
    import tracemalloc
    best = 0
    while True:
        time.sleep(0.5)
        current, _ = tracemalloc.get_traced_memory()
        if current > best + 4 * 2**20:
            best = current
            frames = int(os.environ.get("HX_PROBE_TRACE"))
            stats = tracemalloc.take_snapshot().statistics("lineno" if frames == 1 else "traceback")
            with open(OUT + ".trace", "w") as fh:
                fh.write(f"traced {current / 2**20:.1f} MB, threads={threading.active_count()} VmRSS={_status('VmRSS:')} kB\n")
                for stat in stats[:40]:
                    fh.write(f"{stat.size / 2**10:9.0f} KiB {stat.count:8d} {stat.traceback[-1]}\n")
                    for frame in list(stat.traceback)[-2::-1]:
                        fh.write(f"{'':27s}{frame}\n")
if os.environ.get("HX_PROBE_STACK_KB"):  # what a smaller thread stack would change
    threading.stack_size(int(os.environ["HX_PROBE_STACK_KB"]) * 1024)
if os.environ.get("HX_PROBE_TRACE"):
    import tracemalloc
    tracemalloc.start(int(os.environ["HX_PROBE_TRACE"]))
    pattern = os.environ.get("HX_PROBE_PATTERN")
    threading.Thread(target=_trace_one if pattern else _trace, args=(pattern,) if pattern else (), daemon=True).start()
else:
    threading.Thread(target=_watch, daemon=True).start()
runpy.run_module("hermes_exp.cli.app", run_name="__main__", alter_sys=True)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1024)
    parser.add_argument("--latency-ms", type=float, default=3000)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--out", default="probe.txt")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the runner, repeatable")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hx-probe-") as tmp, mock_server(args.latency_ms) as url:
        work = Path(tmp)
        data = write_prompts(work / "p.jsonl", [{"prompt": f"Probe prompt {i}: count the words"} for i in range(args.n)])
        env = {**os.environ, **dict(e.split("=", 1) for e in args.env),
               "HX_PROBE_OUT": str(Path(args.out).resolve()), "HX_PROBE_N": str(args.n)}
        argv = [f"dataset.path={data}", "run_name=probe", f"model.base_url={url}", "sandbox=local",
                f"num_workers={args.n}", "distribution=terminal_only"]
        started = time.time()
        proc = subprocess.run([args.python, "-c", MONITOR, *argv], cwd=work, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        print(f"exit {proc.returncode} in {time.time() - started:.1f}s", proc.stderr[-2000:] if proc.returncode else "")


if __name__ == "__main__":
    main()
