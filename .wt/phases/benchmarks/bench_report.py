"""`.nsys-rep` end to end: nsys's export formats, reading them, and the whole job against `nsys stats`.

    python benchmarks/bench_report.py REPORT.nsys-rep [REPORT2.nsys-rep ...] [--repeat 3] [--out DIR]

Per report, each step a fresh process, the steps interleaved per repeat (wall, CPU and peak RSS from
wait4, as bench_attribute.py measures them):

* export-sqlite / export-arrowdir / export-parquetdir: ``nsys export --type T`` of the report (a type
  this nsys lacks is left out);
* read-sqlite / read-arrowdir / read-parquetdir: the tables traceattr reads (GPU ops, runtime calls,
  NVTX_EVENTS, StringIds), whole, into polars: ADBC ``SELECT *`` for SQLite, ``read_ipc_stream`` for
  arrowdir (nsys writes Arrow streams), ``read_parquet`` for parquetdir;
* export-arrowdir-tables: the export ``traceattr attribute REPORT`` runs: arrowdir, only the loader's
  tables (``--tables``);
* load-sqlite / load-arrowdir: traceattr's own loader on each export (typed, validated, ranges named);
* traceattr: ``traceattr attribute REPORT --out DIR --format parquet`` on a private copy of the report:
  exports the loader's tables to Arrow in a temporary folder, reads them, attributes;
* traceattr-sqlite: the same with ``TRACEATTR_REPORT_EXPORT=sqlite``: exports to SQLite beside the copy
  (removed before each run), then attributes: the path before the Arrow reader;
* nsys: ``nsys stats --force-export true -r nvtx_gpu_proj_trace REPORT`` (exports too).

It also checks, once per report, that the Arrow and Parquet exports hold the SQLite export's rows and
values for those tables (compared as text, column by column): the condition for reading them instead.
A step that fails (a report without CUDA data makes ``traceattr attribute`` exit 2) is recorded with its
exit status. With ``--out DIR``: ``report_bench.json`` and ``report_summary.csv``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bytecode import byte_compile  # beside this script

TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
          "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "StringIds")  # fmt: skip
READ = {
    "sqlite": """
import sys, polars as pl, adbc_driver_manager as am, adbc_driver_sqlite as sq
db = sq.connect("file:" + sys.argv[1] + "?mode=ro&immutable=1")
conn = am.AdbcConnection(db)
def frame(sql):  # the low-level API traceattr reads through (no pyarrow)
    st = am.AdbcStatement(conn)
    st.set_sql_query(sql)
    stream, _ = st.execute_query()
    out = pl.DataFrame(stream)
    st.close()
    return out
names = set(frame("SELECT name FROM sqlite_master WHERE type = 'table'")["name"].to_list())
print(sum(frame(f"SELECT * FROM {t}").height for t in sys.argv[2:] if t in names))
""",
    "arrowdir": """
import sys, os, polars as pl
paths = [os.path.join(sys.argv[1], t + ".arrow") for t in sys.argv[2:]]
print(sum(pl.read_ipc_stream(p).height for p in paths if os.path.exists(p)))
""",
    "parquetdir": """
import sys, os, polars as pl
paths = [os.path.join(sys.argv[1], t + ".parquet") for t in sys.argv[2:]]
print(sum(pl.read_parquet(p).height for p in paths if os.path.exists(p)))
""",
}
LOAD = "import sys; from traceattr.trace.loader import load_trace; load_trace(sys.argv[1])"


def measure(argv: list[str], env: dict[str, str] | None = None) -> dict[str, float]:
    """Wall, CPU (user + sys), peak RSS (MB), load and exit status of one child process."""
    load = os.getloadavg()[0]
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})}
    )
    _, status, usage = os.wait4(proc.pid, 0)
    return {"wall": time.perf_counter() - start, "cpu": usage.ru_utime + usage.ru_stime,
            "rss": usage.ru_maxrss / 1024, "load": load, "rc": os.waitstatus_to_exitcode(status)}  # fmt: skip


def export(nsys: str, report: Path, kind: str, target: Path, *tables: str) -> list[str]:
    chosen = ["--tables", ",".join(f"^{t}$" for t in tables)] if tables else []
    return [nsys, "export", "--type", kind, *chosen, "--force-overwrite", "true", "-q", "true", "--output",
            str(target), str(report)]  # fmt: skip


def export_types(nsys: str) -> list[str]:
    """The export types this nsys offers, of sqlite, arrowdir and parquetdir."""
    text = subprocess.run([nsys, "export", "--help"], capture_output=True, text=True, check=False).stdout
    return [t for t in ("sqlite", "arrowdir", "parquetdir") if t in text]


def same_tables(sqlite: Path, folders: dict[str, Path]) -> dict[str, object]:
    """Whether each Arrow/Parquet export holds the SQLite export's rows of TABLES (values as text)."""
    import sqlite3

    import polars as pl

    con = sqlite3.connect(f"{sqlite.resolve().as_uri()}?mode=ro", uri=True)
    con.text_factory = bytes
    present = {r[0].decode() for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    verdict: dict[str, object] = {}
    for kind, folder in folders.items():
        problems = []
        for table in (t for t in TABLES if t in present):
            columns = [r[1].decode() for r in con.execute(f"PRAGMA table_info('{table}')")]
            rows = con.execute(f"SELECT * FROM '{table}' ORDER BY rowid").fetchall()
            path = folder / f"{table}.{'arrow' if kind == 'arrowdir' else 'parquet'}"
            if not path.exists():
                problems.append(f"{table}: missing")
                continue
            other = pl.read_ipc_stream(path) if kind == "arrowdir" else pl.read_parquet(path)
            if other.columns != columns or other.height != len(rows):
                problems.append(f"{table}: columns or row count differ ({other.height} vs {len(rows)} rows)")
                continue
            for i, column in enumerate(columns):
                mine = [None if r[i] is None else (r[i].decode("utf-8", "replace") if isinstance(r[i], bytes)
                        else str(r[i])) for r in rows]  # fmt: skip
                theirs = other[column].cast(pl.String).to_list()
                if mine != theirs:
                    problems.append(f"{table}.{column}: values differ")
        verdict[kind] = problems or "same"
    return verdict


def loader_tables() -> list[str]:
    """traceattr's LOADER_TABLES, asked of a child: polars imported here would count in every child's peak RSS."""
    code = "from traceattr.trace.schema import LOADER_TABLES as t; print(','.join(t))"
    return (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        .stdout.strip()
        .split(",")
    )


def main() -> None:
    if sys.argv[1:2] == ["--check-exports"]:  # SQLITE ARROWDIR PARQUETDIR (those nsys made)
        sqlite, *folders = map(Path, sys.argv[2:])
        kinds = [f.name.removeprefix("x_") for f in folders]
        print(json.dumps(same_tables(sqlite, dict(zip(kinds, folders, strict=True)))))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="+", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--nsys", default=os.environ.get("TRACEATTR_NSYS") or shutil.which("nsys"))
    ap.add_argument("--out", type=Path, metavar="DIR")
    args = ap.parse_args()
    if not args.nsys:
        raise SystemExit("no nsys: give --nsys or set TRACEATTR_NSYS")
    sys.stdout.reconfigure(line_buffering=True)
    kinds = export_types(args.nsys)
    work = Path(tempfile.mkdtemp(prefix="traceattr-report-bench-"))
    byte_compile(Path.cwd(), None)  # polars too: an install has its bytecode
    results = []
    try:
        for report in args.reports:
            copy = work / f"r{report.suffix}"
            shutil.copyfile(report, copy)
            exports = {k: work / f"x_{k}" for k in kinds}
            steps = {f"export-{k}": export(args.nsys, copy, k, path) for k, path in exports.items()}
            if "arrowdir" in kinds:
                steps["export-arrowdir-tables"] = export(args.nsys, copy, "arrowdir", work / "tables", *loader_tables())
            for k, path in exports.items():
                steps[f"read-{k}"] = [sys.executable, "-c", READ[k], str(path), *TABLES]
            for k in ("sqlite", "arrowdir"):
                if k in exports:
                    steps[f"load-{k}"] = [sys.executable, "-c", LOAD, str(exports[k])]
            attribute = [sys.executable, "-m", "traceattr", "attribute", str(copy), "--out", str(work / "out"),
                         "--format", "parquet"]  # fmt: skip
            steps["traceattr"] = attribute
            steps["traceattr-sqlite"] = attribute
            steps["nsys"] = [args.nsys, "stats", "-q", "--force-export", "true", "-r", "nvtx_gpu_proj_trace",
                             "--format", "csv", "-o", str(work / "stats"), "--force-overwrite", "true", str(copy)]  # fmt: skip
            runs: dict[str, list[dict[str, float]]] = {k: [] for k in steps}
            for _ in range(args.repeat):
                for name, argv in steps.items():
                    if name in ("traceattr", "traceattr-sqlite", "nsys"):  # each starts without an export beside it
                        for f in work.glob("r.*sqlite*"):
                            f.unlink()
                    env = {"TRACEATTR_REPORT_EXPORT": "sqlite" if name == "traceattr-sqlite" else "arrow"}
                    runs[name].append(measure(argv, env))
                    shutil.rmtree(work / "out", ignore_errors=True)
            check = {}
            if "sqlite" in exports:  # in a child process: polars imported here would count in every child's peak RSS
                argv = [sys.executable, __file__, "--check-exports", *(str(p) for p in exports.values())]
                found = subprocess.run(argv, capture_output=True, text=True, check=False)
                check = json.loads(found.stdout) if found.returncode == 0 else {"error": found.stderr.strip()[-300:]}
            med = {k: {m: statistics.median(r[m] for r in v) for m in ("wall", "cpu", "load")}
                   | {"rss": max(r["rss"] for r in v), "rc": max(r["rc"] for r in v)} for k, v in runs.items()}  # fmt: skip
            results.append({"report": str(report), "bytes": report.stat().st_size, "median": med, "runs": runs,
                            "same_as_sqlite": check})  # fmt: skip
            print(f"report: {report} ({report.stat().st_size / 1e6:.1f} MB), median of {args.repeat}")
            for k, m in med.items():
                print(f"  {k:18s} wall {m['wall']:7.3f} s  cpu {m['cpu']:7.3f} s  peak RSS {m['rss']:6.0f} MB"
                      f"  exit {m['rc']}")  # fmt: skip
            print(f"  Arrow/Parquet exports against the SQLite one: {check}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "report_bench.json").write_text(json.dumps(results, indent=1) + "\n")
        with (args.out / "report_summary.csv").open("w", newline="") as fh:
            out = csv.writer(fh)
            out.writerow(["report", "step", "wall_median", "cpu_median", "peak_rss_mb", "exit"])
            for r in results:
                out.writerows([Path(r["report"]).name, k, round(m["wall"], 3), round(m["cpu"], 3), round(m["rss"], 1),
                               m["rc"]] for k, m in r["median"].items())  # fmt: skip


if __name__ == "__main__":
    main()
