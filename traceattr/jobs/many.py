"""Many reports at once: one attribution per report, in parallel, then one result.

A TP8 run writes eight reports per configuration, a sweep campaign dozens.
Each report is attributed on its own (:func:`attribute_report`: a picklable
module-level function, so local processes, a Dask cluster and nsys's recipe
framework can all run it), and :func:`combine` concatenates what came back
with a ``report`` column. :func:`across_reports` then lines the reports up per
range name (or call series): per-report median, the median, max and spread of
those over reports, and which report (rank) is slowest.

A report that fails (damaged, foreign, missing) fails alone: its result
carries the one-line reason and the others finish. Ranges and per-report
summaries come back to the caller (small); per-op tables can be millions of
rows, so with a parts folder each worker writes its own to parquet and the
caller streams them into the final file. Workers and the caller must then
see the same file system, as they already must for the inputs.

This module is the entry (:func:`run_reports`, and every public name re-exported);
the jobs live beside it: :mod:`.many_inputs` (which reports), :mod:`.many_report`
(one report), :mod:`.many_pool` (local processes or Dask), :mod:`.many_combine`
(combining, lining up across reports, writing).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from traceattr.core.cpus import usable_cpus
from traceattr.core.errors import TraceNote
from traceattr.jobs.many_combine import (
    Combined,
    across_reports,
    combine,
    kernels_lazy,
    parts_folder,
    pooled_compute_peak,
    pooled_events,
    report_events,
    rounds_per_report,
    write_combined,
)
from traceattr.jobs.many_inputs import expand_inputs, report_names
from traceattr.jobs.many_pool import in_processes, on_dask
from traceattr.jobs.many_report import REPORT, REPORT_SCHEMA, ReportResult, Settings, attribute_report, check_settings


def run_reports(
    paths: Sequence[str | Path],
    settings: Settings,
    *,
    workers: int | None = None,
    dask: str | None = None,
    parts: str | Path | None = None,
    on_done: Callable[[ReportResult], None] | None = None,
) -> list[ReportResult]:
    """Attribute every report in *paths*; results in input order.

    Local processes by default (*workers*, default: one per core; 1 runs in
    this process), or on the Dask scheduler at *dask* (``"local"`` starts a
    local cluster of *workers* processes). *on_done* sees each result as it
    arrives (a progress bar).
    """
    names = report_names(paths)
    jobs = [(str(p), n, i) for i, (p, n) in enumerate(zip(paths, names, strict=True))]
    part_dir = None if parts is None else str(parts)
    workers = capped_workers(workers, len(jobs), local=dask is None or dask == "local")
    done = on_done or (lambda _r: None)
    if dask is not None:
        results = list(on_dask(jobs, settings, part_dir, dask, workers, done))
    elif workers == 1 or len(jobs) == 1:
        results = []
        for path, name, i in jobs:
            results.append(attribute_report(path, name, i, settings=settings, parts=part_dir))
            done(results[-1])
    else:
        results = list(in_processes(jobs, settings, part_dir, min(workers, len(jobs)), done))
    return sorted(results, key=lambda r: r.index)


def capped_workers(asked: int | None, reports: int, *, local: bool) -> int:
    """How many worker processes to start: *asked* (default one per core), at most one per report and, on this
    machine, one per usable core (more only share the cores and hold memory each); a note says when capped."""
    cores = usable_cpus()
    workers = max(1, asked or cores)
    cap = max(1, min(reports, cores)) if local else max(1, reports)
    if workers > cap:
        if asked:
            why = f"{reports} report{'s' if reports != 1 else ''}, {cores} usable core{'s' if cores != 1 else ''}"
            warnings.warn(TraceNote(f"-j {asked}: {cap} worker{'s' if cap != 1 else ''} ({why})"), stacklevel=2)
        workers = cap
    return workers


__all__ = [
    "REPORT", "REPORT_SCHEMA", "Combined", "ReportResult", "Settings", "across_reports", "attribute_report",
    "capped_workers", "check_settings", "combine", "expand_inputs", "kernels_lazy", "parts_folder", "pooled_compute_peak", "pooled_events", "report_events", "report_names", "rounds_per_report",
    "run_reports", "write_combined",
]  # fmt: skip
