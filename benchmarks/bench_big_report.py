"""A large `.nsys-rep` end to end (issue 36): capture it, then every path from it, side by side.

    python benchmarks/bench_big_report.py WORK [--report R.nsys-rep] [--steps 70000] [--json OUT.json]

Without ``--report`` it captures ``big_report_workload.py`` first (``nsys profile --trace cuda,nvtx
--sample=none --cpuctxsw=none``). Then, each a fresh process timed by wait4 (wall, CPU, peak RSS), once:

* ``nsys stats -r nvtx_gpu_proj_trace`` on a private copy of the report (it exports SQLite itself);
* ``nsys export`` alone: arrowdir (every table, and only the loader's, ``--tables``), parquetdir and
  sqlite (the loader's tables);
* ``traceattr attribute|compare|report`` on the report, cold (an empty export cache: nsys exports) and
  warm (the cache holds the export), and ``compare`` on the Arrow export folder itself (the warm
  target: ≤ 1.2× that).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def measure(argv: list[str], env: dict[str, str] | None = None) -> dict[str, float | int]:
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        print(f"  {' '.join(argv[:4])}: exit {code}: {err.strip()[-300:]}", flush=True)
    return {"wall": round(wall, 3), "cpu": round(usage.ru_utime + usage.ru_stime, 3),
            "rss_mb": round(usage.ru_maxrss / 1024), "exit": code}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work", type=Path)
    ap.add_argument("--report", type=Path)
    ap.add_argument("--steps", type=int, default=70_000)
    ap.add_argument("--nsys", default=os.environ.get("TRACEATTR_NSYS") or shutil.which("nsys") or "nsys")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from traceattr.trace.schema import LOADER_TABLES

    work, nsys = args.work, args.nsys
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, float | int]] = {}

    def step(name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        results[name] = measure(argv, env)
        print(f"{name:28s} {results[name]}", flush=True)
        if args.json:
            args.json.write_text(json.dumps({"report": str(rep), "results": results}, indent=1))

    rep = args.report or work / "big.nsys-rep"
    if args.report is None:
        step("capture", [nsys, "profile", "--trace", "cuda,nvtx", "--sample=none", "--cpuctxsw=none",
                         "--force-overwrite", "true", "-o", str(work / "big"),
                         sys.executable, str(HERE / "big_report_workload.py"), "--steps", str(args.steps)])  # fmt: skip
    print(f"report: {rep} ({rep.stat().st_size / 1e6:.1f} MB)", flush=True)
    tables = ",".join(f"^{t}$" for t in LOADER_TABLES)
    exports = work / "exports"
    shutil.rmtree(exports, ignore_errors=True)
    exports.mkdir()

    def export(name: str, kind: str, extra: list[str]) -> None:
        target = exports / name.replace(" ", "_").replace("-", "")
        step(name, [nsys, "export", "--type", kind, *extra, "--force-overwrite", "true", "--quiet", "true",
                    "--output", str(target), str(rep)])  # fmt: skip

    export("export arrowdir --tables", "arrowdir", ["--tables", tables])
    cache = work / "cache"
    env = {**os.environ, "TRACEATTR_EXPORT_CACHE": str(cache)}
    ta = [sys.executable, "-m", "traceattr"]
    commands = {
        "attribute": ["attribute", str(rep), "--out", str(work / "att"), "--format", "csv"],
        "compare": ["compare", str(rep)],
        "report": ["report", str(rep), "-o", str(work / "report.html")],
    }
    for name, argv in commands.items():
        shutil.rmtree(cache, ignore_errors=True)  # cold: nsys exports
        shutil.rmtree(work / "att", ignore_errors=True)
        (work / "report.html").unlink(missing_ok=True)
        step(f"traceattr {name} cold", [*ta, *argv], env)
        shutil.rmtree(work / "att", ignore_errors=True)
        (work / "report.html").unlink(missing_ok=True)
        step(f"traceattr {name} warm", [*ta, *argv], env)
    arrow = exports / "export_arrowdir_tables"
    if arrow.is_dir():
        step("traceattr compare on the arrowdir", [*ta, "compare", str(arrow)], env)
    copy = work / "stats" / rep.name
    copy.parent.mkdir(exist_ok=True)
    shutil.copyfile(rep, copy)
    step("nsys stats nvtx_gpu_proj_trace", [nsys, "stats", "-q", "-r", "nvtx_gpu_proj_trace", "--format", "csv",
                                            "-o", str(work / "stats" / "nsys"), "--force-overwrite", "true", str(copy)])  # fmt: skip
    export("export parquetdir --tables", "parquetdir", ["--tables", tables])
    export("export sqlite --tables", "sqlite", ["--tables", tables])
    export("export arrowdir (all)", "arrowdir", [])
    export("export sqlite (all)", "sqlite", [])
    sizes = {
        p.name: sum(f.stat().st_size for f in [p, *p.rglob("*")] if f.is_file()) // 10**6 for p in exports.iterdir()
    }
    print("export sizes, MB:", sizes, flush=True)
    if args.json:
        args.json.write_text(json.dumps({"report": str(rep), "report_mb": rep.stat().st_size / 1e6,
                                         "export_mb": sizes, "results": results}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
