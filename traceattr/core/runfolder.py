"""The files of a ``traceattr profile`` run folder, named once.

``profile`` creates the folder; ``compare``, ``report``, ``round`` and
``diff`` read it. A round folder holds one run folder per capture and the receipt. Table files are named by stem (the writer adds ``.csv``,
``.json`` or ``.parquet``). Pure names and a JSON reader: the GPU runner
imports this too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from traceattr.core.errors import TraceError

TRACE_STEM = "trace"  # nsys --output: trace.nsys-rep, exported to trace.sqlite
TRACE = f"{TRACE_STEM}.sqlite"
TRACE_REPORT = f"{TRACE_STEM}.nsys-rep"
PLAN = "plan.json"  # what the runner is asked to do (traceattr.runner.plan.RunPlan)
RUNNER = "runner.json"  # what the runner saw: GPU, versions, per-shape arm status, clocks, CUDA events
RUN = "run.json"  # the manifest profile writes last: commands, versions, outputs
REPORT = "report.html"
# table stems
RANGES = "ranges"
KERNELS = "kernels"
CALLS = "calls"
SUMMARY = "summary"
CROSSOVERS = "crossovers"
FIT = "fit"
# a round folder (traceattr round): one run folder per capture, then the receipt
RECEIPT = "receipt"  # receipt.md, receipt.csv, receipt.json
SENSITIVITY = "sensitivity"  # the back-to-back capture's run folder


def round_capture(index: int) -> str:
    """The run folder of round *index* (0-based) inside a round folder."""
    return f"round-{index + 1}"


# many reports at once (traceattr.jobs.many, the nsys recipe): one row per report; per range/series across reports
REPORTS = "reports"
ACROSS_REPORTS = "across_reports"


def read_json(folder: Path, name: str) -> dict[str, Any] | None:
    """``folder/name`` as a JSON object; None when *folder* is not a folder or has no such file."""
    path = Path(folder) / name
    if not Path(folder).is_dir() or not path.is_file():
        return None
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise TraceError(path, f"unreadable JSON ({err})") from None
    if not isinstance(content, dict):
        raise TraceError(path, "expected a JSON object")
    return content


def runner_events(folder: Path) -> list[dict[str, Any]] | None:
    """The CUDA-event times of a run folder's runner.json (``backend, shape, iter, event_us`` each); None without one."""
    runner = read_json(folder, RUNNER)
    if runner is None:
        return None
    events = runner.get("events", [])
    keys = {"backend", "shape", "iter", "event_us"}
    if not isinstance(events, list) or not all(isinstance(e, dict) and keys <= e.keys() for e in events):
        raise TraceError(Path(folder) / RUNNER, f"expected its events to be objects with {', '.join(sorted(keys))}")
    return events
