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

from traceattr.analysis.bases import BASES
from traceattr.analysis.calls import calls as call_table
from traceattr.analysis.calls import comparable, grouping_note
from traceattr.analysis.crossover import sample_crossings
from traceattr.analysis.decision import Decision, Provenance, decide
from traceattr.analysis.fit import fit
from traceattr.analysis.roofline import ComputePeak, device_compute_peak, peak_bandwidth
from traceattr.analysis.summary import summarize
from traceattr.analysis.verdicts import SameProgram, call_samples, same_label
from traceattr.attribution.engine import Attribution
from traceattr.core.errors import TraceattrError


@dataclass(frozen=True)
class Analysis:
    calls: pl.DataFrame  # analysis.calls: one row per measured call (may be empty)
    summary: pl.DataFrame  # analysis.summary: per (shape, backend), plus EVENT_SUMMARY columns with events
    crossovers: pl.DataFrame  # the decision's breakpoints (analysis.crossover's schema): where the dispatch switches
    fit: pl.DataFrame  # analysis.fit: fixed cost + per-token cost per (shape family, backend)
    peak_bytes_per_s: float | None
    peak_source: str
    note: str | None = None  # analysis.calls.grouping_note: why nothing can be compared (then no winner is shown)
    compute_peak: ComputePeak | None = None  # dense FLOP/s per dtype (analysis.roofline), with its source
    decision: Decision | None = None  # analysis.decision: every verdict, computed once; every surface renders it


def analyse(
    att: Attribution,
    *,
    peak_bytes_per_s: float | None = None,
    events: Sequence[dict[str, Any]] | None = None,
    group: str | None = None,
    same_program: SameProgram = same_label,
    source: str = "",
    basis: str = "span",
    calls: pl.DataFrame | None = None,
) -> Analysis:
    """Every per-trace analysis of *att*; *events* are a runner.json's CUDA-event times (optional);
    *group* a grouping preset or regex (:mod:`traceattr.core.callnames`; default: the presets tried in turn);
    *same_program*: which arms run one program (:data:`~traceattr.analysis.verdicts.SameProgram`); *calls*: its
    call table where made already (:func:`traceattr.analysis.calls.reduced_calls`), else read from *att*."""
    peak, peak_source = peak_bandwidth(att.trace.devices, peak_bytes_per_s)
    return analyse_calls(
        call_table(att, group) if calls is None else calls, peak, peak_source, events=events, same_program=same_program,
        compute_peak=device_compute_peak(att.trace.devices), source=source or str(att.meta.path), basis=basis,
    )  # fmt: skip


OTHER_WORK = 0.01  # a share of the calls' span in flush-role ops or nested ranges above this is said


def analyse_calls(
    table: pl.DataFrame,
    peak_bytes_per_s: float | None,
    peak_source: str,
    *,
    events: Sequence[dict[str, Any]] | None = None,
    same_program: SameProgram = same_label,
    compute_peak: ComputePeak | None = None,
    source: str = "",
    basis: str = "span",
) -> Analysis:
    """The analyses of a call table already made (calls pooled from many traces: :mod:`traceattr.jobs.many`);
    the roofline needs *compute_peak* besides the bandwidth (:func:`traceattr.analysis.roofline.compute_peak`)."""
    table = _with_basis(table, basis, events)
    time, words = BASES[basis]
    # each call's time per compared (shape, backend), once for the verdicts and the crossings
    filled = pl.col("shape").fill_null(pl.col("series")), pl.col("backend").fill_null(pl.col("series"))
    samples = call_samples(table.with_columns(filled), time)
    summary = summarize(table, peak_bytes_per_s, same_program, compute_peak, time, samples)
    if events is not None:
        summary = with_events(summary, table, events)
    note = grouping_note(table)
    # nothing comparable (no names read as backend + shape): no verdict anywhere
    decided = summary.head(0) if note is not None else summary.filter(comparable())
    provenance = Provenance(f"median {words}, µs", basis, source=source, note=other_work(table, basis))
    decision = decide(decided, sample_crossings(decided, table, same_program, time, samples), provenance)
    return Analysis(
        table,
        summary,
        decision.crossings_frame(),
        fit(table, time=time),
        peak_bytes_per_s,
        peak_source,
        note,
        compute_peak,
        decision,
    )


EVENT_SUMMARY = ("event_us", "event_vs_span", "event_minus_span_us", "event_lead_us", "event_tail_us",
                 "event_unexplained_us")  # fmt: skip


def with_events(summary: pl.DataFrame, calls: pl.DataFrame, events: Sequence[dict[str, Any]]) -> pl.DataFrame:
    """Add the CUDA-event cross-check per (shape, backend), and what explains its difference from the span.

    Each call's event time is matched to its call (backend, shape, iteration):
    event − span = ``event_lead`` (the stream idle between the start event and
    the first op: the flush ended before, or the CPU reached the launch later)
    + ``event_tail`` (the stop event recorded after the last op ended) +
    ``event_unexplained`` (the rest: the record calls' own submission time).
    All are medians over calls, in µs; ``event_vs_span`` = median event / median span − 1.
    """
    if not events:
        return summary.with_columns([pl.lit(None, pl.Float64).alias(c) for c in EVENT_SUMMARY])
    ev = pl.DataFrame(list(events)).select("backend", "shape", pl.col("iter").cast(pl.Int64), "event_us")
    # events are keyed by the canonical shape name; calls carry it too (from the NVTX message)
    read = calls.select("backend", "shape", "iter", "gpu_span_ns", "event_lead_ns", "event_tail_ns")
    per_call = read.join(ev, on=["backend", "shape", "iter"], how="inner").with_columns(
        (pl.col("event_us") - pl.col("gpu_span_ns") * 1e-3).alias("_diff")
    )
    med = per_call.group_by("shape", "backend").agg(
        pl.col("event_us").median(),
        pl.col("_diff").median().alias("event_minus_span_us"),
        (pl.col("event_lead_ns").median() * 1e-3).alias("event_lead_us"),
        (pl.col("event_tail_ns").median() * 1e-3).alias("event_tail_us"),
        (pl.col("_diff") - (pl.col("event_lead_ns") + pl.col("event_tail_ns")) * 1e-3)
        .median()
        .alias("event_unexplained_us"),
    )
    return summary.join(med, on=["shape", "backend"], how="left", maintain_order="left").with_columns(
        (pl.col("event_us") / pl.col("median_us") - 1).alias("event_vs_span")
    )


def _with_basis(table: pl.DataFrame, basis: str, events: Sequence[dict[str, Any]] | None) -> pl.DataFrame:
    """*table* ready for *basis*: with ``event_ns`` (the runner's CUDA-event time of each call) for ``events``;
    a basis no compared call has a time for is refused (one line)."""
    if basis not in BASES:
        raise TraceattrError(f"--time {basis!r}: not a basis (one of {', '.join(BASES)})")
    if basis == "events" and events:  # the runner's own CUDA-event times
        ev = pl.DataFrame(list(events)).select(
            "backend", "shape", pl.col("iter").cast(pl.Int64),
            (pl.col("event_us") * 1e3).round().cast(pl.Int64).alias("event_ns"),
        )  # fmt: skip
        table = table.join(ev, on=["backend", "shape", "iter"], how="left")
    elif basis == "events":  # any trace: its own cudaEventRecord pairs inside each call, as the stream reached them
        recorded = pl.col("event_lead_ns").is_not_null() & pl.col("event_tail_ns").is_not_null()
        table = table.with_columns(
            pl.when(recorded).then(pl.col("gpu_span_ns") + pl.col("event_lead_ns") + pl.col("event_tail_ns"))
            .alias("event_ns")
        )  # fmt: skip
    time = BASES[basis][0]
    compared = table.select("shape", "backend", time).filter(comparable()) if basis != "span" else table.head(0)
    if compared.height and compared[time].null_count() == compared.height:
        why = {"attention": "no call has a kernel of role attention or reduce (the role rules: --rules)",
               "work": "every op of every call has role flush", "events": "no call has CUDA-event times (a traceattr run folder's runner.json, or two "
               "cudaEventRecord calls inside each call's range)"}  # fmt: skip
        raise TraceattrError(f"--time {basis}: {why[basis]}")
    return table


def other_work(table: pl.DataFrame, basis: str) -> str | None:
    """What the calls' time holds besides the call, where it is more than :data:`OTHER_WORK` of their span:
    flush-role ops (the L2 flush, a hold) and op time in ranges nested in the calls; None otherwise."""
    if table.height == 0:
        return None
    span = float(table["gpu_span_ns"].sum() or 0)
    if span <= 0:
        return None
    flush = float(table["flush_exposed_ns"].sum() or 0) / span
    nested = float(table["nested_ns"].sum() or 0) / span if "nested_ns" in table.columns else 0.0
    parts = []
    if flush > OTHER_WORK:
        parts.append(f"{100 * flush:.1f}% of the calls' GPU span is flush-role kernels")
    if nested > OTHER_WORK:
        parts.append(f"{100 * nested:.1f}% of their GPU time runs in NVTX ranges nested inside them")
    if not parts:
        return None
    if basis == "span":
        advice = ("the verdict compares spans, that work included: --time work leaves flush-role kernels out, "
                  "--time attention keeps the attention and reduce kernels alone (a --rules range rule marks a "
                  "nested range's kernels as flush)")  # fmt: skip
    else:
        advice = f"the verdict compares each call's {basis} time (--time {basis})"
    return f"calls hold more than the call: {'; '.join(parts)}; {advice}"
