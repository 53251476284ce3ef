"""The one way from an attribution to its analyses: calls → summary (+ CUDA events) → crossovers, fit.

``profile``, ``compare`` and ``report`` all start here, so a column added to
the calls or the summary reaches every command. Analyses over more than one
trace or arm sit beside it: :mod:`.rounds` (A/B receipts with gates),
:mod:`.diff` (before/after traces), :mod:`.fit` (fixed cost vs per-token).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from traceattr.analysis.calls import calls as call_table
from traceattr.analysis.calls import grouping_note
from traceattr.analysis.crossover import crossovers
from traceattr.analysis.fit import fit
from traceattr.analysis.roofline import peak_bandwidth
from traceattr.analysis.summary import summarize
from traceattr.attribution.engine import Attribution


@dataclass(frozen=True)
class Analysis:
    calls: pl.DataFrame  # analysis.calls: one row per measured call (may be empty)
    summary: pl.DataFrame  # analysis.summary: per (shape, backend), plus event_us/event_vs_span with events
    crossovers: pl.DataFrame  # analysis.crossover: where the fastest backend changes along ctx
    fit: pl.DataFrame  # analysis.fit: fixed cost + per-token cost per (shape family, backend)
    peak_bytes_per_s: float | None
    peak_source: str
    note: str | None = None  # analysis.calls.grouping_note: why nothing can be compared (then no winner is shown)


def analyse(
    att: Attribution,
    *,
    peak_bytes_per_s: float | None = None,
    events: Sequence[dict[str, Any]] | None = None,
    group: str | None = None,
) -> Analysis:
    """Every per-trace analysis of *att*; *events* are a runner.json's CUDA-event times (optional);
    *group* a grouping preset or regex (:mod:`traceattr.callnames`; default: the presets tried in turn)."""
    peak, source = peak_bandwidth(att.trace.devices, peak_bytes_per_s)
    return analyse_calls(call_table(att, group), peak, source, events=events)


def analyse_calls(
    table: pl.DataFrame,
    peak_bytes_per_s: float | None,
    peak_source: str,
    *,
    events: Sequence[dict[str, Any]] | None = None,
) -> Analysis:
    """The analyses of a call table already made (calls pooled from many reports: :mod:`traceattr.multi`)."""
    summary = summarize(table, peak_bytes_per_s)
    if events is not None:
        summary = with_events(summary, table, events)
    return Analysis(
        table, summary, crossovers(summary, table), fit(table), peak_bytes_per_s, peak_source, grouping_note(table)
    )


def with_events(summary: pl.DataFrame, calls: pl.DataFrame, events: Sequence[dict[str, Any]]) -> pl.DataFrame:
    """Add the CUDA-event median per (shape, backend) and how far it is from the nsys span."""
    if not events:
        return summary.with_columns(
            pl.lit(None, pl.Float64).alias("event_us"), pl.lit(None, pl.Float64).alias("event_vs_span")
        )
    ev = pl.DataFrame(list(events)).select("backend", "shape", pl.col("iter").cast(pl.Int64), "event_us")
    # events are keyed by the canonical shape name; calls carry it too (from the NVTX message)
    med = ev.group_by("shape", "backend").agg(pl.col("event_us").median())
    return summary.join(med, on=["shape", "backend"], how="left").with_columns(
        (pl.col("event_us") / pl.col("median_us") - 1).alias("event_vs_span")
    )
