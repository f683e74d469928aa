"""Dataset readers: the same rows as JSONL, CSV, Parquet and an HF save_to_disk folder; for each, the
validating scan a run starts with (read, validate, key every row) in a fresh process: its time per row
and its peak memory next to the size of the data. Readers stream, so the peak stays far below the
data's size (what grows with the rows is the list of task keys a run keeps).

    python bench/bench_inputs.py -n 200000 --prompt-chars 1000
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

PROBE = """
import json, resource, sys, time
t0 = time.perf_counter(); c0 = resource.getrusage(resource.RUSAGE_SELF)
from hermes_exp.dataset.tasks import open_dataset, scan
if sys.argv[3] == "parquet":
    import pyarrow.parquet
if sys.argv[3] == "hf":
    import datasets  # the libraries' own memory is not the data's: counted before the baseline
imported = time.perf_counter()
def hwm():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")) / 1024
base = hwm()
found = scan(open_dataset({"path": sys.argv[1], "split": sys.argv[2] or None}), "id1:bench", False, None)
c1 = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"rows": len(found.indexed), "seconds": time.perf_counter() - imported, "base_mb": base,
                  "peak_mb": hwm(), "cpu": c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime}))
"""


def write_all(work: Path, n: int, chars: int) -> dict[str, tuple[Path, str]]:
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    filler = ("lorem ipsum dolor sit amet " * (chars // 27 + 1))[:chars]
    rows = ({"prompt": f"Task {i}: {filler}", "topic": f"t{i % 7}", "id": f"r{i}"} for i in range(n))
    jsonl, csv_path, parquet, hf = work / "d.jsonl", work / "d.csv", work / "d.parquet", work / "d_hf"
    with jsonl.open("w") as j, csv_path.open("w", newline="") as c:
        writer = csv.DictWriter(c, fieldnames=["prompt", "topic", "id"])
        writer.writeheader()
        for row in rows:
            j.write(json.dumps(row) + "\n")
            writer.writerow(row)
    table = pa.Table.from_pylist([json.loads(line) for line in jsonl.open()])
    pq.write_table(table, parquet, row_group_size=8192)
    datasets.Dataset(table).save_to_disk(str(hf))
    return {"jsonl": (jsonl, ""), "csv": (csv_path, ""), "parquet": (parquet, ""), "hf": (hf, "")}


def size_mb(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=200_000, help="rows")
    parser.add_argument("--prompt-chars", type=int, default=1000)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="hx-bench-inputs-"))
    work.mkdir(parents=True, exist_ok=True)
    paths = write_all(work, args.n, args.prompt_chars)
    print(f"{args.n} rows, prompts of {args.prompt_chars} characters\n")
    print("| format | data MB | scan s | µs/row | CPU s | peak MB over the imports | that / data size |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, (path, split) in paths.items():
        out = subprocess.run([sys.executable, "-c", PROBE, str(path), split, name], capture_output=True, text=True,
                             check=True).stdout
        r = json.loads(out)
        grown = r["peak_mb"] - r["base_mb"]
        print(f"| {name} | {size_mb(path):.0f} | {r['seconds']:.2f} | {1e6 * r['seconds'] / r['rows']:.1f} | "
              f"{r['cpu']:.2f} | {grown:.0f} | {grown / size_mb(path):.2f} |")


if __name__ == "__main__":
    main()
