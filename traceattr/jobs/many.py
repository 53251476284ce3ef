"""Many traces at once: one attribution per trace, in parallel, then one result.

A TP8 run writes eight traces per configuration, a sweep campaign dozens.
Each trace is attributed on its own (:func:`attribute_trace`: a picklable
module-level function, so local processes, a Dask cluster and nsys's recipe
framework can all run it), and :func:`combine` concatenates what came back
with a ``trace`` column. :func:`across_traces` then lines the traces up per
range name (or call series): per-trace median, the median, max and spread of
those over traces, and which trace (rank) is slowest.

A trace that fails (damaged, foreign, missing) fails alone: its result
carries the one-line reason and the others finish. Ranges and per-trace
summaries come back to the caller (small); per-op tables can be millions of
rows, so with a parts folder each worker writes its own to parquet and the
caller streams them into the final file. Workers and the caller must then
see the same file system, as they already must for the inputs.

This module is the entry (:func:`run_traces`, and every public name re-exported);
the jobs live beside it: :mod:`.many_inputs` (which traces), :mod:`.many_trace`
(one trace), :mod:`.many_pool` (local processes or Dask), :mod:`.many_combine`
(combining, lining up across traces, writing).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from traceattr.core.cpus import usable_cpus
from traceattr.core.errors import TraceNote
from traceattr.jobs.many_combine import (
    Combined,
    across_traces,
    combine,
    iterations_per_trace,
    kernels_lazy,
    parts_folder,
    pooled_compute_peak,
    pooled_events,
    trace_events,
    write_combined,
)
from traceattr.jobs.many_inputs import expand_inputs, trace_names
from traceattr.jobs.many_pool import in_processes, on_dask
from traceattr.jobs.many_trace import TRACE_COLUMN, TRACE_SCHEMA, Settings, TraceResult, attribute_trace, check_settings


def run_traces(
    paths: Sequence[str | Path],
    settings: Settings,
    *,
    workers: int | None = None,
    dask: str | None = None,
    parts: str | Path | None = None,
    on_done: Callable[[TraceResult], None] | None = None,
) -> list[TraceResult]:
    """Attribute every trace in *paths*; results in input order.

    Local processes by default (*workers*, default: one per core; 1 runs in
    this process), or on the Dask scheduler at *dask* (``"local"`` starts a
    local cluster of *workers* processes). *on_done* sees each result as it
    arrives (a progress bar).
    """
    names = trace_names(paths)
    jobs = [(str(p), n, i) for i, (p, n) in enumerate(zip(paths, names, strict=True))]
    part_dir = None if parts is None else str(parts)
    workers = capped_workers(workers, len(jobs), local=dask is None or dask == "local")
    done = on_done or (lambda _r: None)
    if dask is not None:
        results = list(on_dask(jobs, settings, part_dir, dask, workers, done))
    elif workers == 1 or len(jobs) == 1:
        results = []
        for path, name, i in jobs:
            results.append(attribute_trace(path, name, i, settings=settings, parts=part_dir))
            done(results[-1])
    else:
        results = list(in_processes(jobs, settings, part_dir, min(workers, len(jobs)), done))
    return sorted(results, key=lambda r: r.index)


def capped_workers(asked: int | None, traces: int, *, local: bool) -> int:
    """How many worker processes to start: *asked* (default one per core), at most one per trace and, on this
    machine, one per usable core (more only share the cores and hold memory each); a note says when capped."""
    cores = usable_cpus()
    workers = max(1, asked or cores)
    cap = max(1, min(traces, cores)) if local else max(1, traces)
    if workers > cap:
        if asked:
            why = f"{traces} trace{'s' if traces != 1 else ''}, {cores} usable core{'s' if cores != 1 else ''}"
            warnings.warn(TraceNote(f"-j {asked}: {cap} worker{'s' if cap != 1 else ''} ({why})"), stacklevel=2)
        workers = cap
    return workers


__all__ = [
    "TRACE_COLUMN",
    "TRACE_SCHEMA",
    "Combined",
    "Settings",
    "TraceResult",
    "across_traces",
    "attribute_trace",
    "capped_workers",
    "check_settings",
    "combine",
    "expand_inputs",
    "iterations_per_trace",
    "kernels_lazy",
    "parts_folder",
    "pooled_compute_peak",
    "pooled_events",
    "run_traces",
    "trace_events",
    "trace_names",
    "write_combined",
]  # fmt: skip
