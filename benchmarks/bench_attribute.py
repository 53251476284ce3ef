"""Time `traceattr attribute` against `nsys stats` and a plain read, in one run.

    python benchmarks/bench_attribute.py TRACE.sqlite [TRACE2.sqlite ...] [--repeat 3] [--skip nsys] [--out DIR]
    python benchmarks/bench_attribute.py --generate DIR [--repeat 3] --out DIR2    # makes nested + sweep in DIR

Each contender runs as its own fresh process; the parent measures its wall time, CPU time (user + sys,
from wait4, the process and all it waited for) and peak RSS (the largest process of the tree). The
contenders run interleaved in one loop (read, traceattr, fallback, nsys, read, …), so a change in the
load of a shared machine hits all of them alike; the 1-minute load average is recorded with each run.
Between runs the loop waits ``--settle`` seconds (3): on a VM that hands freed memory back to its host
(free page reporting, as on the 2-core box) a run started at once finds its predecessor's memory and page
cache still mapped, and one started later pays the host's faults: 400 MB written right after a free
took 0.15 s, 8 s later 1.9 s. Without the wait, whoever follows a short contender is faster than whoever
follows nsys (traceattr after nsys 1.96-2.26 s, the same code after the fallback 1.68-2.23 s).

* read:  the tables traceattr needs (kernels, runtime, NVTX, StringIds) read whole (``SELECT *``) into
  polars, one ADBC read per table, the fastest plain reader we know;
* floor: traceattr's own SQLite reads of the columns it needs (the loader's queries, reader and threads),
  then the command's output tables written again by its writer from a copy in memory (a reference run's,
  made before the loop): reading and writing with nothing labelled or attributed. Issue 36's 2-core target
  is traceattr <= 1.25 x floor (printed per run, and in bench.json's ``floor_ratio``);
* floor-io: the same reads, then the reference run's output bytes copied (256 KiB writes): the bare I/O,
  no text made;
* traceattr: ``traceattr attribute TRACE --out DIR --format csv``, the whole job: load, attribute in
  nsys mode, write ranges and kernels; csv as nsys writes it, and as issue 20 measures it (``--format
  parquet`` to time that writer: it holds a 64 k-row group of every column while it encodes, ~20 MB more
  on the nested trace);
* sqlite3: the same command as on a machine without ADBC (its modules made unimportable): the loader's
  fallback through Python's ``sqlite3``, reading in worker processes; its workers' own peak RSS is
  recorded too (``workers_rss``);
* sqlite3-1: the same, reading on one thread in its own process (``TRACEATTR_READ_PROCESSES=0``);
* baseline (``--baseline TREE``): the same command from another checkout of traceattr (``PYTHONPATH``),
  e.g. ``git archive main | tar -x -C /tmp/base`` for a before/after in one interleaved session; with
  ``--with``, baseline-compare and baseline-report too;
* nsys:  ``nsys stats -r nvtx_gpu_proj_trace --format csv`` (on a private copy: nsys may write into the
  file it reads); the binary is ``--nsys``, else ``$TRACEATTR_NSYS``, else ``nsys`` on PATH.

Targets (issues 10, 20): traceattr ≤ 0.10 × nsys and ≤ 1.5 × read, peak RSS ≤ nsys's, the sqlite3
fallback within 3 × traceattr. Medians over --repeat runs are printed with the ratios, on wall time and
on CPU time (on a busy machine CPU time is the steadier of the two), and beside traceattr / nsys the
wall ratio at best: traceattr's CPU time over every usable core, which no overlap can beat. With ``--out DIR``: ``bench.json``
(the machine, every run, the medians), ``runs.csv`` (one row per run) and ``summary.csv`` (one row per
trace and contender), for a machine where only files come back (the H200 host).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bytecode import byte_compile  # beside this script

HERE = Path(__file__).resolve().parent
READ_SNIPPET = """
import sys, polars as pl, adbc_driver_sqlite.dbapi as adbc
conn = adbc.connect("file:" + sys.argv[1] + "?mode=ro&immutable=1")
n = 0
for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "StringIds"):
    n += pl.read_database(f"SELECT * FROM {table}", conn).height
print(n)
"""
# the traceattr command on a machine without ADBC: its modules cannot be imported, so the loader falls
# back to Python's sqlite3 (argv[0] "traceattr": the CLI sets itself up as the program, as the script does)
# At exit (the CLI leaves by os._exit) it says the peak RSS of its reading processes, read from /proc as
# they are stopped: wait4's figure is the tree's largest process, and a child's ru_maxrss starts from its
# parent's RSS when it was started (Linux keeps the high-water mark across exec).
FALLBACK_SNIPPET = """
import os, sys
sys.modules["adbc_driver_manager"] = sys.modules["adbc_driver_sqlite"] = None
from traceattr.trace import sqlite_processes
peak = [0]
def kill(workers, kill=sqlite_processes._kill):
    for proc in workers:
        try:
            with open(f"/proc/{proc.pid}/status") as status:
                peak[0] = max([peak[0]] + [int(l.split()[1]) for l in status if l.startswith("VmHWM:")])
        except OSError:
            pass
    kill(workers)
sqlite_processes._kill = kill
def leave(code, _exit=os._exit):
    print("bench: workers' peak RSS", peak[0], file=sys.stderr)
    sys.stderr.flush()
    _exit(code)
os._exit = leave
sys.argv = ["traceattr", *sys.argv[1:]]
from traceattr.cli import main
main()
"""
# The floor of `attribute --out` (issue 36): the loader's own SQLite reads of the columns attribution needs (its
# queries, reader and threads; nothing labelled, checked or attributed), then the command's output tables written by
# its own writer (core.output.write_table) from a copy held in memory: what reading and writing cost with nothing
# attributed, in one fresh process. floor-io writes the same bytes instead (a reference run's files copied 256 KiB
# at a time, as the sinks write): reading plus the bare I/O, no text made.
_FLOOR_READ = """
import shutil, sys
from pathlib import Path
from traceattr.cli.process import start
start()  # the program's settings (threads, allocator), made before polars loads
from traceattr.trace.loader import _op_tables, _read_sqlite
from traceattr.trace.sqlite_source import SqliteSource
src = SqliteSource(Path(sys.argv[1]))
try:
    read = _read_sqlite(src, _op_tables(src))
finally:
    src.close()
reference, out = Path(sys.argv[2]), Path(sys.argv[3])
out.mkdir()
"""
FLOOR_SNIPPET = (
    _FLOOR_READ
    + """
import polars as pl
from traceattr.core.output import write_table
for stem in ("ranges", "kernels"):
    write_table(pl.read_ipc(reference / f"{stem}.arrow"), out, stem, sys.argv[4])
"""
)
FLOOR_IO_SNIPPET = (
    _FLOOR_READ
    + """
for f in sorted(f for f in reference.iterdir() if f.suffix != ".arrow"):  # the written tables
    with f.open("rb") as fin, (out / f.name).open("wb") as fout:
        shutil.copyfileobj(fin, fout, 256 << 10)
"""
)
# the reference run: the command's output files, and its tables as Arrow files for the floor to write again
REFERENCE_SNIPPET = """
import sys
from pathlib import Path
from traceattr.cli.process import start
start()
from traceattr.attribution.engine import attribute
from traceattr.trace.loader import load_trace
att = attribute(load_trace(sys.argv[1]))
att.ranges.write_ipc(Path(sys.argv[2]) / "ranges.arrow")
att.ops_lazy().collect().write_ipc(Path(sys.argv[2]) / "kernels.arrow")
"""
SHAPES = {"nested": ["--shape", "nested"], "sweep": []}  # make_sweep_trace.py's two shapes (benchmarks/README.md)
METRICS = ("wall", "cpu", "rss", "load", "workers_rss")
WORKERS_RSS = re.compile(r"^bench: workers' peak RSS (\d+)$", re.M)


def measure(
    argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None, answers: tuple[int, ...] = (0,)
) -> dict[str, float]:
    """Wall seconds, CPU seconds (user + sys), peak RSS (MB) and 1-minute load of one child process."""
    load = os.getloadavg()[0]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) not in answers:
        raise SystemExit(f"{' '.join(argv[:4])} failed: {err.strip()[-500:]}")
    workers = WORKERS_RSS.search(err)  # the sqlite3 fallback's reading processes, where it had any
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss / 1024, "load": load,
            "workers_rss": int(workers[1]) / 1024 if workers else 0.0}  # fmt: skip


ANALYSES = ("compare", "report")  # --with: the commands a user runs after attribute, timed beside it (issue 36)


def contenders(
    trace: Path,
    work: Path,
    nsys: str | None,
    skip: set[str],
    baseline: Path | None,
    fmt: str = "csv",
    analyses: tuple[str, ...] = (),
) -> dict[str, tuple[list[str], dict[str, str] | None]]:
    """name: (argv, environment) of each contender, in the order they run."""
    out = ["--out", str(work / "out"), "--format", fmt]
    command = [sys.executable, "-m", "traceattr", "attribute", str(trace), *out]
    runs: dict[str, tuple[list[str], dict[str, str] | None]] = {
        "read": ([sys.executable, "-c", READ_SNIPPET, str(trace)], None),
        "floor": ([sys.executable, "-c", FLOOR_SNIPPET, str(trace), str(work / "reference"), str(work / "out"), fmt],
                  None),
        "floor-io": ([sys.executable, "-c", FLOOR_IO_SNIPPET, str(trace), str(work / "reference"), str(work / "out")],
                     None),
        "traceattr": (command, None),
        "sqlite3": ([sys.executable, "-c", FALLBACK_SNIPPET, "attribute", str(trace), *out], None),
        # the fallback reading on one thread, in its own process (as before its worker processes)
        "sqlite3-1": ([sys.executable, "-c", FALLBACK_SNIPPET, "attribute", str(trace), *out],
                      {**os.environ, "TRACEATTR_READ_PROCESSES": "0"}),
    }  # fmt: skip
    if "compare" in analyses:  # the verdict and tables on stdout, as a user reads them
        runs["compare"] = ([sys.executable, "-m", "traceattr", "compare", str(trace), "--format", "csv"], None)
    if "report" in analyses:
        runs["report"] = (
            [sys.executable, "-m", "traceattr", "report", str(trace), "-o", str(work / "report.html")],
            None,
        )
    if baseline is not None:
        # before any path already there (a device's bundled packages stay importable)
        paths = [str(baseline), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
        runs["baseline"] = (command, env)
        for name in analyses:  # the same command from the baseline checkout: before and after in one loop
            runs[f"baseline-{name}"] = (runs[name][0], env)
    if nsys:
        copy = work / "nsys-copy.sqlite"
        runs["nsys"] = ([nsys, "stats", "-q", "-r", "nvtx_gpu_proj_trace", "--format", "csv", "-o",
                         str(work / "nsys"), "--force-overwrite", "true", str(copy)], None)  # fmt: skip
    return {k: v for k, v in runs.items() if k not in skip}


def bench(
    trace: Path,
    work: Path,
    repeat: int,
    nsys: str | None,
    skip: set[str],
    baseline: Path | None,
    fmt: str = "csv",
    settle: float = 0.0,
    analyses: tuple[str, ...] = (),
) -> dict:
    plan = contenders(trace, work, nsys, skip, baseline, fmt, analyses)
    if "floor" in plan or "floor-io" in plan:  # what the floors write: a reference run's output, made once, untimed
        shutil.rmtree(work / "reference", ignore_errors=True)
        subprocess.run([sys.executable, "-m", "traceattr", "attribute", str(trace), "--out", str(work / "reference"),
                        "--format", fmt], cwd=work, check=True, capture_output=True)  # fmt: skip
        (work / "reference" / "attribution.json").unlink(missing_ok=True)  # the manifest: a few hundred bytes
        subprocess.run([sys.executable, "-c", REFERENCE_SNIPPET, str(trace), str(work / "reference")], cwd=work,
                       check=True, capture_output=True)  # fmt: skip
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in plan}
    for _ in range(repeat):
        for name, (argv, env) in plan.items():
            if name == "nsys":
                shutil.copyfile(trace, work / "nsys-copy.sqlite")
            # run from the scratch folder: `python -m traceattr` started in a checkout would import that
            # checkout (the current folder comes first on sys.path), whatever PYTHONPATH says
            # compare's "nothing to compare" (exit 2, a trace without backend/shape names) is an answer too
            answers = (0, 2) if name.removeprefix("baseline-") in ANALYSES else (0,)
            runs[name].append(measure(argv, env, cwd=work, answers=answers))
            shutil.rmtree(work / "out", ignore_errors=True)
            (work / "report.html").unlink(missing_ok=True)
            for f in [*work.glob("nsys*.csv"), *work.glob("nsys-copy*")]:
                f.unlink()
            time.sleep(settle)  # every run starts in the same state of memory (the module's docstring)
    med = {
        k: {m: statistics.median(r[m] for r in v) for m in ("wall", "cpu", "load")}
        | {
            "rss": max(r["rss"] for r in v),
            "workers_rss": max(r["workers_rss"] for r in v),
            "wall_min": min(r["wall"] for r in v),
            "wall_max": max(r["wall"] for r in v),
        }
        for k, v in runs.items()
    }
    result = {"trace": str(trace), "mb": trace.stat().st_size / 1e6, "runs": runs, "median": med}
    if "floor" in med and "traceattr" in med:  # issue 36's 2-core target: traceattr <= 1.25 x its floor
        result["floor_ratio"] = {m: med["traceattr"][m] / med["floor"][m] for m in ("wall", "cpu")}
        pairs = zip(runs["traceattr"], runs["floor"], strict=True)
        result["floor_ratio"]["per_run"] = [a["wall"] / f["wall"] for a, f in pairs]
    return result


def report(result: dict) -> None:
    med = result["median"]
    print(f"trace: {result['trace']} ({result['mb']:.0f} MB), median of {len(next(iter(result['runs'].values())))}")
    for k, m in med.items():
        print(f"  {k:10s} wall {m['wall']:7.2f} s ({m['wall_min']:.2f}–{m['wall_max']:.2f})  cpu {m['cpu']:7.2f} s  "
              f"peak RSS {m['rss']:6.0f} MB  load {m['load']:.1f}"
              + (f"  workers' peak RSS {m['workers_rss']:.0f} MB" if m["workers_rss"] else ""))  # fmt: skip
    for name, other, target in (("traceattr", "read", 1.5), ("traceattr", "floor", 1.25), ("traceattr", "floor-io", None),
                                ("traceattr", "nsys", 0.10),
                                ("sqlite3", "traceattr", 3.0), ("sqlite3-1", "traceattr", None),
                                ("traceattr", "baseline", None), ("compare", "traceattr", 1.5),
                                ("report", "traceattr", 1.5), ("compare", "baseline-compare", None),
                                ("report", "baseline-report", None), ("baseline-compare", "baseline", None),
                                ("baseline-report", "baseline", None), ("compare", "nsys", None),
                                ("report", "nsys", None)):  # fmt: skip
        if name in med and other in med:
            a, o = med[name], med[other]
            goal = f"  (time target ≤ {target})" if target else ""
            print(f"  {name} / {other:9s} wall {a['wall'] / o['wall']:.3f}  cpu {a['cpu'] / o['cpu']:.3f}  "
                  f"rss {a['rss'] / o['rss']:.2f}{goal}")  # fmt: skip
            if other == "nsys":  # what better overlap alone could reach: every core busy from start to end
                cores = _affinity() or os.cpu_count() or 1
                floor = (
                    f"  floor {med['floor']['wall'] / o['wall']:.3f}" if "floor" in med and name == "traceattr" else ""
                )
                print(f"  {name} / {other:9s} wall at best {a['cpu'] / cores / o['wall']:.3f}{floor}  "
                      f"(its CPU time over all {cores} cores; floor: the reads and writes alone)")  # fmt: skip
            if other == "floor":
                per_run = ", ".join(f"{r:.2f}" for r in result["floor_ratio"]["per_run"])
                print(f"  {name} / {other:9s} per run {per_run}")


def _affinity() -> int | None:
    """The CPUs this process may run on (None where the platform does not say)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def machine(nsys: str | None) -> dict[str, object]:
    """What ran the benchmark: CPUs, Python, polars, ADBC, nsys, the allocator settings in force."""
    info: dict[str, object] = {
        "host": platform.node(), "platform": platform.platform(), "python": platform.python_version(),
        "cpus": os.cpu_count(), "usable_cpus": _affinity(),
        "env": {k: os.environ[k] for k in ("_RJEM_MALLOC_CONF", "POLARS_MAX_THREADS", "PYTHONDONTWRITEBYTECODE")
                if k in os.environ},
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }  # fmt: skip
    probe = "import polars, importlib.util as u; print(polars.__version__, bool(u.find_spec('adbc_driver_sqlite')))"
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False).stdout.split()
    info["polars"], info["adbc"] = (found[0], found[1] == "True") if len(found) == 2 else (None, None)
    if nsys:
        version = subprocess.run([nsys, "--version"], capture_output=True, text=True, check=False).stdout.strip()
        info["nsys"] = version.splitlines()[-1] if version else None
    return info


def write_results(folder: Path, info: dict[str, object], results: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bench.json").write_text(json.dumps({"machine": info, "results": results}, indent=1) + "\n")
    with (folder / "runs.csv").open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["trace", "contender", "run", *METRICS])
        for r in results:
            for name, runs in r["runs"].items():
                out.writerows([Path(r["trace"]).name, name, i, *(round(run[m], 3) for m in METRICS)]
                              for i, run in enumerate(runs))  # fmt: skip
    with (folder / "summary.csv").open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["trace", "contender", "runs", "wall_median", "wall_min", "wall_max", "cpu_median",
                      "peak_rss_mb", "load_median", "workers_peak_rss_mb"])  # fmt: skip
        for r in results:
            for name, m in r["median"].items():
                out.writerow([Path(r["trace"]).name, name, len(r["runs"][name]), *(round(m[k], 3) for k in
                              ("wall", "wall_min", "wall_max", "cpu", "rss", "load", "workers_rss"))])  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument(
        "--generate", type=Path, metavar="DIR", help="make the nested and sweep traces in DIR (or reuse them)"
    )
    ap.add_argument("--calls", type=int, default=500_000, help="calls in a generated trace without --generate")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--nsys", default=os.environ.get("TRACEATTR_NSYS") or shutil.which("nsys"), help="nsys binary")
    ap.add_argument("--skip", action="append", default=[],
                    choices=("read", "floor", "floor-io", "traceattr", "sqlite3", "sqlite3-1", "nsys"),
                    help="leave a contender out")  # fmt: skip
    ap.add_argument("--format", choices=("csv", "parquet"), default="csv", help="traceattr's output format")
    ap.add_argument("--baseline", type=Path, metavar="TREE", help="also time the traceattr checkout in TREE")
    ap.add_argument("--out", type=Path, metavar="DIR", help="write bench.json, runs.csv and summary.csv here")
    ap.add_argument("--json", type=Path, help="also write every measurement here")
    ap.add_argument("--settle", type=float, default=3.0, metavar="S", help="seconds to wait between runs")
    ap.add_argument("--with", dest="analyses", action="append", default=[], choices=ANALYSES,
                    help="also time `traceattr compare` / `report` on the trace (their ratio to attribute)")  # fmt: skip
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # results show as each trace finishes, also into a file

    work = Path(tempfile.mkdtemp(prefix="traceattr-bench-"))
    traces = list(args.traces)
    if args.generate:
        args.generate.mkdir(parents=True, exist_ok=True)
        for shape, flags in SHAPES.items():
            path = args.generate / f"{shape}.sqlite"
            if not path.is_file():
                subprocess.run([sys.executable, str(HERE / "make_sweep_trace.py"), str(path), *flags], check=True)
            traces.append(path)
    if not traces:
        traces = [work / "sweep.sqlite"]
        subprocess.run(
            [sys.executable, str(HERE / "make_sweep_trace.py"), str(traces[0]), "--calls", str(args.calls)], check=True
        )
    info = machine(args.nsys if "nsys" not in args.skip else None)
    info["byte_compiled"] = byte_compile(work, args.baseline)
    info["format"] = args.format
    info["settle_s"] = args.settle
    print(json.dumps(info))
    results = []
    try:
        for trace in traces:
            results.append(
                bench(
                    trace.resolve(),
                    work,
                    args.repeat,
                    args.nsys,
                    set(args.skip),
                    args.baseline,
                    args.format,
                    args.settle,
                    tuple(args.analyses),
                )
            )
            report(results[-1])
            if args.out:  # after each trace: a run cut short still leaves what it measured
                write_results(args.out, info, results)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
