"""Where the time and memory of `traceattr attribute --out` go, phase by phase, in one process.

    python benchmarks/phases.py TRACE.sqlite [--format csv|parquet] [--profile load|attribute|write] [--top 25]

Prints, after each phase (import polars, import traceattr, load, attribute, write ranges,
write kernels): wall and CPU seconds (user + sys, all threads) of the phase, the resident set
and the peak so far. With --profile, one phase runs under cProfile on a process-time clock
(CPU of every thread, so a parallel read shows as its total cost) and its top functions are
printed by cumulative time. The phases are those of the command (same loader, attribution and
writers); the command adds its start-up (typer, ~0.1 s) and the result folder's manifest.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _rss_mb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    return 0


class Phases:
    def __init__(self, profile: str | None, top: int) -> None:
        self.profile, self.top = profile, top
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def run(self, name: str, step: Callable[[], Any]) -> Any:
        profiler = cProfile.Profile(time.process_time) if name.startswith(self.profile or "\0") else None
        if profiler:
            profiler.enable()
        result = step()
        if profiler:
            profiler.disable()
        wall, cpu = time.perf_counter(), time.process_time()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        print(f"{name:18s} wall {wall - self.wall:6.2f} s  cpu {cpu - self.cpu:6.2f} s  "
              f"rss {_rss_mb():6,d} MB  peak {peak:6,d} MB", flush=True)  # fmt: skip
        if profiler:
            pstats.Stats(profiler, stream=sys.stdout).sort_stats("cumulative").print_stats(self.top)
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--profile", choices=("load", "attribute", "write"))
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--format", choices=("csv", "parquet"), default="parquet", help="the tables' format")
    args = parser.parse_args()
    phases = Phases(args.profile, args.top)
    phases.run("import polars", lambda: __import__("polars"))
    phases.run("import traceattr", lambda: __import__("traceattr.attribution.engine"))
    from traceattr.attribution.engine import attribute
    from traceattr.core.output import write_table
    from traceattr.trace.loader import load_trace

    trace = phases.run("load", lambda: load_trace(args.trace))
    att = phases.run("attribute", lambda: attribute(trace))
    with tempfile.TemporaryDirectory(prefix="traceattr-phases-") as out:
        phases.run("write ranges", lambda: write_table(att.ranges, Path(out), "ranges", args.format))
        phases.run("write kernels", lambda: write_table(att.ops_lazy(), Path(out), "kernels", args.format))


if __name__ == "__main__":
    main()
