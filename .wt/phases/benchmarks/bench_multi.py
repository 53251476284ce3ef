"""Many reports at once: `traceattr attribute DIR --out … --format parquet` with 1, 2 and all workers, and on Dask.

    python benchmarks/bench_multi.py WORKDIR [--reports 100] [--calls 2000] [--repeat 2] [--json out.json]

Writes *--reports* schema-exact exports shaped like a profile sweep
(``make_sweep_trace.build``, each its own seed) into WORKDIR/reports, then
runs the whole command in a fresh process per configuration: local processes
with 1 worker (in turn, in the CLI's own process), 2 workers and one per core,
and a local Dask cluster of one worker per core. Per run: wall time, CPU time
of the command and everything it started, the 1-minute load average before and
after (the development machine is shared), the largest peak RSS of any worker
(from reports.parquet: each worker's ``ru_maxrss``) against the largest single
report, and the command's own peak RSS. Configurations are interleaved per
repeat so load drifts hit them alike; the median over repeats is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/synth: the trace writer
from make_sweep_trace import build

from tests.synth.writer import write_export


def make_reports(folder: Path, n: int, calls: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        path = folder / f"rank{i:03d}.sqlite"
        if not path.exists():
            write_export(path, build(calls, shapes=10, seed=i))
        paths.append(path)
    return paths


def one_report_peak(path: Path, out: Path) -> float:
    """Peak RSS (MB) of `traceattr attribute` on one report in a fresh process: one report's share.

    Measured first: RUSAGE_CHILDREN's maxrss is the largest child so far."""
    subprocess.run([sys.executable, "-m", "traceattr", "attribute", str(path), "--out", str(out), "--format", "parquet"],
                   capture_output=True, check=True)  # fmt: skip
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def run_once(reports: Path, out: Path, args: list[str]) -> dict[str, float]:
    shutil.rmtree(out, ignore_errors=True)
    load0 = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "traceattr", "attribute", str(reports), "--out", str(out), "--format", "parquet", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{args}: exit {proc.returncode}: {proc.stderr[-2000:]}")
    per = pl.read_parquet(out / "reports.parquet")
    workers = per.group_by("worker_pid").agg(pl.col("worker_peak_rss_mb").max())
    return {
        "wall": wall,
        "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "load_before": load0,
        "load_after": os.getloadavg()[0],
        "workers_seen": workers.height,
        "worker_peak_mb": float(workers["worker_peak_rss_mb"].max()),
        "report_seconds_sum": float(per["seconds"].sum()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--reports", type=int, default=100)
    ap.add_argument("--calls", type=int, default=2000, help="calls per report (2.5 kernels each)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--skip", action="append", default=[], help="a configuration to leave out (e.g. dask)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    t0 = time.perf_counter()
    paths = make_reports(a.workdir / "reports", a.reports, a.calls)
    sizes = [p.stat().st_size for p in paths]
    print(f"{len(paths)} reports, {sum(sizes) / 1e6:.1f} MB in all, largest {max(sizes) / 1e6:.2f} MB "
          f"(made in {time.perf_counter() - t0:.0f} s)")  # fmt: skip
    single = one_report_peak(paths[sizes.index(max(sizes))], a.workdir / "out1")
    print(f"one report alone (the largest): peak RSS {single:.0f} MB")
    cores = os.cpu_count() or 1
    configs = {"1 worker": ["-j", "1"], "2 workers": ["-j", "2"], f"all ({cores})": ["-j", str(cores)],
               f"dask local ({cores})": ["--dask", "local", "-j", str(cores)]}  # fmt: skip
    configs = {k: v for k, v in configs.items() if not any(s in k for s in a.skip)}
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in configs}
    for _ in range(a.repeat):
        for name, args in configs.items():
            runs[name].append(run_once(a.workdir / "reports", a.workdir / "out", args))
            r = runs[name][-1]
            print(
                f"  {name:16s} wall {r['wall']:6.1f} s  cpu {r['cpu']:6.1f} s  load {r['load_before']:.1f}→{r['load_after']:.1f}"
            )
    med = {k: {m: statistics.median(r[m] for r in v) for m in v[0]} for k, v in runs.items()}
    print(f"\nmedian of {a.repeat}: | config | wall s | CPU s | load | workers | peak RSS per worker MB |")
    for k, m in med.items():
        print(
            f"| {k} | {m['wall']:.1f} | {m['cpu']:.1f} | {m['load_before']:.1f} | {m['workers_seen']:.0f} | {m['worker_peak_mb']:.0f} |"
        )
    if a.json:
        summary = {
            "reports": len(paths),
            "bytes": sum(sizes),
            "one_report_peak_mb": single,
            "runs": runs,
            "median": med,
        }
        a.json.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
