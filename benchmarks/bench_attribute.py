"""Time `traceattr attribute` against `nsys stats` and a plain read, in one run.

    python benchmarks/bench_attribute.py TRACE.sqlite [TRACE2.sqlite ...] [--repeat 3] [--skip nsys]

Without a trace, one is generated (benchmarks/make_sweep_trace.py: ≥ 1M
kernels). Each contender runs as its own fresh process; the parent measures
its wall time, CPU time (user + sys, from wait4) and peak RSS. The
contenders run interleaved in one loop (read, traceattr, nsys, read, …), so
a change in the load of a shared machine hits all of them alike; the load
average is recorded with each run.

* read:  the tables traceattr needs (kernels, runtime, NVTX, StringIds) read
  whole (``SELECT *``) into polars, one ADBC read per table, the fastest plain
  reader we know;
* traceattr: ``traceattr attribute TRACE --out DIR --format parquet`` — the
  whole job: load, attribute in nsys mode, write ranges and kernels;
* nsys:  ``nsys stats -r nvtx_gpu_proj_trace --format csv`` (on a private
  copy: nsys may write into the file it reads).

Targets (issue 10): traceattr ≤ 0.10 × nsys and ≤ 1.5 × read, peak RSS ≤
nsys's. Medians over --repeat runs are printed with the ratios, on wall
time and on CPU time (on a busy machine CPU time is the steadier of the two).
"""

from __future__ import annotations

import argparse
import json
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
for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "StringIds"):
    n += pl.read_database(f"SELECT * FROM {table}", conn).height
print(n)
"""


def measure(argv: list[str]) -> dict[str, float]:
    """Wall seconds, CPU seconds (user + sys), peak RSS (MB) and 1-minute load of one child process."""
    load = os.getloadavg()[0]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"{argv[0]} failed: {err.strip()[-500:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss / 1024, "load": load}


def bench(trace: Path, work: Path, repeat: int, nsys: str | None, skip: set[str]) -> dict[str, object]:
    runs: dict[str, list[dict[str, float]]] = {"read": [], "traceattr": [], "nsys": []}
    for i in range(repeat):
        if "read" not in skip:
            runs["read"].append(measure([sys.executable, "-c", READ_SNIPPET, str(trace)]))
        out = work / f"out{i}"
        runs["traceattr"].append(
            measure(
                [sys.executable, "-m", "traceattr", "attribute", str(trace), "--out", str(out), "--format", "parquet"]
            )
        )
        shutil.rmtree(out, ignore_errors=True)
        if nsys and "nsys" not in skip:
            copy = work / "nsys-copy.sqlite"
            shutil.copyfile(trace, copy)
            runs["nsys"].append(measure([nsys, "stats", "-q", "-r", "nvtx_gpu_proj_trace", "--format", "csv",
                                         "-o", str(work / "nsys"), "--force-overwrite", "true", str(copy)]))  # fmt: skip
            copy.unlink()
            for f in work.glob("nsys*.csv"):
                f.unlink()
    med = {
        k: {m: statistics.median(r[m] for r in v) for m in ("wall", "cpu", "load")} | {"rss": max(r["rss"] for r in v)}
        for k, v in runs.items()
        if v
    }
    return {"trace": str(trace), "mb": trace.stat().st_size / 1e6, "runs": runs, "median": med}


def report(result: dict[str, object]) -> None:
    med = result["median"]
    print(f"trace: {result['trace']} ({result['mb']:.0f} MB), median of {len(result['runs']['traceattr'])}")
    for k, m in med.items():
        print(
            f"  {k:10s} wall {m['wall']:7.2f} s  cpu {m['cpu']:7.2f} s  peak RSS {m['rss']:6.0f} MB  load {m['load']:.1f}"
        )
    ta = med["traceattr"]
    for other, target in (("read", 1.5), ("nsys", 0.10)):
        if other in med:
            o = med[other]
            print(f"  traceattr / {other:5s} wall {ta['wall'] / o['wall']:.3f}  cpu {ta['cpu'] / o['cpu']:.3f}  "
                  f"rss {ta['rss'] / o['rss']:.2f}  (time target ≤ {target})")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--calls", type=int, default=500_000, help="calls in a generated trace")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--nsys", default=shutil.which("nsys"), help="nsys binary (default: on PATH)")
    ap.add_argument("--skip", action="append", default=[], choices=("read", "nsys"), help="leave a contender out")
    ap.add_argument("--json", type=Path, help="also write every measurement here")
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # results show as each trace finishes, also into a file

    work = Path(tempfile.mkdtemp(prefix="traceattr-bench-"))
    traces = args.traces
    if not traces:
        traces = [work / "sweep.sqlite"]
        subprocess.run(
            [sys.executable, str(HERE / "make_sweep_trace.py"), str(traces[0]), "--calls", str(args.calls)], check=True
        )
    results = []
    try:
        for trace in traces:
            results.append(bench(trace, work, args.repeat, args.nsys, set(args.skip)))
            report(results[-1])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
