"""The files of a ``traceattr profile`` run folder, named once.

``profile`` creates the folder; ``compare``, ``report``, ``round`` and
``diff`` read it. A round folder holds one run folder per capture and the receipt. Table files are named by stem (the writer adds ``.csv``,
``.json`` or ``.parquet``). Pure names: the GPU runner imports this too; the
JSON files' contents are records of :mod:`traceattr.core.records`.
"""

from __future__ import annotations

from pathlib import Path

TRACE_STEM = "trace"  # nsys --output: trace.nsys-rep, exported to trace.sqlite
TRACE = f"{TRACE_STEM}.sqlite"
TRACE_REPORT = f"{TRACE_STEM}.nsys-rep"
PLAN = "plan.json"  # what the runner is asked to do (traceattr.core.records.RunPlan)
RUNNER = "runner.json"  # what the runner saw: GPU, versions, per-shape arm status, clocks, CUDA events (RunnerRecord)
RUN = "run.json"  # the manifest profile writes last: commands, versions, outputs (RunRecord)
REPORT = "report.html"
# table stems
RANGES = "ranges"
KERNELS = "kernels"
CALLS = "calls"
SUMMARY = "summary"
CROSSOVERS = "crossovers"
FIT = "fit"
# a round folder (traceattr round): one run folder per capture, then the receipt
RECEIPT = "receipt"  # receipt.md, receipt.csv, receipt.json (ReceiptRecord)
SENSITIVITY = "sensitivity"  # the back-to-back capture's run folder
PHASES = "phases"  # phases.md of a round with stamps; phases.csv of compare/diff --out (docs/phases.md)
# a run folder's in-kernel stamps (traceattr.phases.layout): stamps/index.json and the arrays it lists
STAMPS_DIR = "stamps"
STAMPS_INDEX = "index.json"


def capture_folder(index: int) -> str:
    """The run folder of round *index* (0-based) inside a round folder."""
    return f"capture-{index + 1}"


# many traces at once (traceattr.jobs.many, the nsys recipe): one row per trace; per range/series across traces
TRACES = "traces"
ACROSS_TRACES = "across_traces"


def stamp_folder(path: Path) -> Path:
    """The run folder of *path*: itself, or the folder of its trace.sqlite."""
    return path.parent if path.is_file() and path.name == TRACE else path


def has_stamps(path: Path) -> bool:
    """Whether *path* (a run folder, or its trace) holds stamps."""
    return (stamp_folder(path) / STAMPS_DIR / STAMPS_INDEX).is_file()


def round_folder_of(path: Path) -> Path | None:
    """The round folder *path* is, or lies in (one of its capture folders, or a capture's trace), else None:
    a round folder holds receipt.json, and whatever of it a command is given speaks as its receipt."""
    for folder in (path, path.parent, path.parent.parent):
        if folder.is_dir() and (folder / f"{RECEIPT}.json").is_file():
            return folder
    return None
