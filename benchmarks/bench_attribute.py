"""Time `traceattr attribute` against `nsys stats` and a plain read, in one run.

    python benchmarks/bench_attribute.py [TRACE.sqlite] [--calls 500000] [--repeat 3]

Without a trace, one is generated (benchmarks/make_sweep_trace.py: ≥ 1M
kernels). Each contender runs as its own fresh process (its wall time and
peak RSS are measured by the parent through wait4):

* nsys:  ``nsys stats -r nvtx_gpu_proj_trace`` (on a private copy: nsys may
  write into the file it reads), output to /dev/null-like temp folder;
* read:  the three tables read whole (``SELECT *``) into polars via ADBC, the
  fastest plain reader we know (see DESIGN.md);
* traceattr: ``traceattr attribute TRACE --out DIR --format parquet`` — the
  whole job: load, attribute, write ranges and kernels.

Targets (2-core machine): traceattr ≤ nsys/10, ≤ 1.5 × read, peak RSS ≤ 4 ×
file size. Medians over --repeat runs are printed with the ratios.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
READ_SNIPPET = """
import sys, polars as pl, adbc_driver_sqlite.dbapi as adbc
conn = adbc.connect("file:" + sys.argv[1] + "?mode=ro&immutable=1")
n = 0
for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"):
    n += pl.read_database(f"SELECT * FROM {table}", conn).height
print(n)
"""


def measure(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"{argv[0]} failed: {err.strip()[-500:]}")
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", type=Path)
    ap.add_argument("--calls", type=int, default=500_000, help="calls in a generated trace")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--nsys", default=shutil.which("nsys"), help="nsys binary (default: on PATH)")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="traceattr-bench-"))
    trace = args.trace
    if trace is None:
        trace = work / "sweep.sqlite"
        subprocess.run(
            [sys.executable, str(HERE / "make_sweep_trace.py"), str(trace), "--calls", str(args.calls)], check=True
        )
    size_mb = trace.stat().st_size / 1e6
    runs: dict[str, list[tuple[float, float]]] = {"read": [], "traceattr": [], "nsys": []}
    for i in range(args.repeat):
        runs["read"].append(measure([sys.executable, "-c", READ_SNIPPET, str(trace)]))
        out = work / f"out{i}"
        runs["traceattr"].append(
            measure(
                [sys.executable, "-m", "traceattr", "attribute", str(trace), "--out", str(out), "--format", "parquet"]
            )
        )
        if args.nsys:
            copy = work / "nsys-copy.sqlite"
            shutil.copyfile(trace, copy)
            runs["nsys"].append(measure([args.nsys, "stats", "-q", "-r", "nvtx_gpu_proj_trace", "--format", "csv",
                                         "-o", str(work / "nsys"), "--force-overwrite", "true", str(copy)]))  # fmt: skip
    med = {k: (statistics.median(w for w, _ in v), max(m for _, m in v)) for k, v in runs.items() if v}
    print(f"trace: {trace} ({size_mb:.0f} MB), {args.repeat} runs each, median wall time / peak RSS")
    for k, (wall, rss) in med.items():
        print(f"  {k:10s} {wall:7.2f} s   {rss:7.0f} MB")
    ta, rd = med["traceattr"], med["read"]
    print(f"traceattr / plain read   = {ta[0] / rd[0]:.2f}  (target ≤ 1.5)")
    if "nsys" in med:
        print(
            f"traceattr / nsys stats   = {ta[0] / med['nsys'][0]:.3f}  (target ≤ 0.1)  nsys is {med['nsys'][0] / ta[0]:.1f}x slower"
        )
    print(f"traceattr peak RSS / file = {ta[1] / size_mb:.2f}  (target ≤ 4)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
