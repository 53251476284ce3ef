"""Per shape and backend: how long a call takes, where the time goes, who wins.

Times are per call (first kernel start → last kernel end, the span); the
median is the headline and p10–p90 the spread. Where the time goes is the
exposed partition of each call's span (:mod:`traceattr.attribution.calltime`):
``<role>_exposed_us``, ``overlap_us`` and ``gap_us`` are medians over calls,
and ``<part>_share`` is the part's total over the span's total, so the shares
of a row add up to exactly 1. ``<role>_sum_us`` (op time summed per role,
overlaps counted twice) are kept for reference. ``launch_latency_us`` splits
into ``launch_overhead_us`` + ``queue_wait_us`` per call (medians need not
add up); ``stream_idle_before_us`` is the stream's idle time before the
call's first op. ``bytes`` and ``flops`` are what one call of the shape must
move and compute, ``bound`` which of the GPU's peaks limits it (memory or
compute), and ``roofline`` the share of that bound the median call reaches
(:mod:`traceattr.analysis.roofline`; null where a peak or the shape is unknown).
``winner`` is a declared winner: faster than every other backend with 95%
confidence (:mod:`traceattr.analysis.verdicts`); ``verdict`` says winner, tie
(within ``tie_pct`` %), slower, same program or alone, and
``vs_best_low``–``vs_best_high`` is the interval of ``ratio_to_best``.
With arms run in ABBA iterations, ``iteration_wins`` counts the iterations in which a
backend was the fastest, and ``consistent`` is False when the comparison
with the winner flips direction between rounds.
"""

from __future__ import annotations

import polars as pl

from traceattr.analysis.decision import shape_key
from traceattr.analysis.roofline import ComputePeak, bound_columns, shape_work
from traceattr.analysis.verdicts import SameProgram, Samples, call_samples, same_label, shape_verdicts
from traceattr.attribution.calltime import EXPOSED_COLUMNS, LAUNCH_COLUMNS
from traceattr.attribution.engine import ROLE_COLUMNS
from traceattr.core.keys import group_numbers

PART_COLUMNS = (*EXPOSED_COLUMNS, "gap_ns")  # per call they add up to gpu_span_ns
PARTS = tuple(c.removesuffix("_ns") for c in PART_COLUMNS)  # attention_exposed, …, overlap, gap
SUMMARY_COLUMNS = (
    "shape", "backend", "calls", "median_us", "p10_us", "p90_us", "min_us", "max_us", "cv",
    "busy_us", "kernel_sum_us", *(f"{p}_us" for p in PARTS), *(f"{p}_share" for p in PARTS),
    "launch_latency_us", *(c.replace("_ns", "_us") for c in LAUNCH_COLUMNS), "kernels",
    *[c.replace("_ns", "_us") for c in ROLE_COLUMNS],
    "bytes", "flops", "bound", "roofline", "ratio_to_best", "vs_best_low", "vs_best_high", "verdict", "same_program_as", "winner",
    "tie_pct", "iteration_wins", "iterations", "consistent",
)  # fmt: skip


def summarize(
    calls: pl.DataFrame,
    peak_bytes_per_s: float | None,
    same_program: SameProgram = same_label,
    compute_peak: ComputePeak | None = None,
    time: str = "gpu_span_ns",
    samples: Samples | None = None,
) -> pl.DataFrame:
    """One row per (shape, backend) of *calls* (see :mod:`traceattr.analysis.calls`); the roofline needs both
    peaks, *peak_bytes_per_s* and *compute_peak*; *samples*: :func:`~traceattr.analysis.verdicts.call_samples` of
    *calls*, where made already (the crossings read them too)."""
    us = 1e-3
    c = calls.with_columns(pl.col("shape").fill_null(pl.col("series")), pl.col("backend").fill_null(pl.col("series")))
    aggs = [
        pl.len().alias("calls"),
        (pl.col(time).median() * us).alias("median_us"),
        (pl.col(time).quantile(0.1, "linear") * us).alias("p10_us"),
        (pl.col(time).quantile(0.9, "linear") * us).alias("p90_us"),
        (pl.col(time).min() * us).alias("min_us"),
        (pl.col(time).max() * us).alias("max_us"),
        (pl.col(time).std() / pl.col(time).mean()).alias("cv"),
        (pl.col("busy_ns").median() * us).alias("busy_us"),
        (pl.col("kernel_sum_ns").median() * us).alias("kernel_sum_us"),
        *[(pl.col(c).median() * us).alias(f"{p}_us") for c, p in zip(PART_COLUMNS, PARTS, strict=True)],
        # totals over totals: the shares of a row partition the calls' time exactly
        *[
            (pl.col(c).sum() / pl.col("gpu_span_ns").sum()).fill_nan(None).alias(f"{p}_share")
            for c, p in zip(PART_COLUMNS, PARTS, strict=True)
        ],
        (pl.col("launch_latency_ns").median() * us).alias("launch_latency_us"),
        *[(pl.col(c).median() * us).alias(c.replace("_ns", "_us")) for c in LAUNCH_COLUMNS],
        pl.col("kernels").median().alias("kernels"),
        *[(pl.col(r).median() * us).alias(r.replace("_ns", "_us")) for r in ROLE_COLUMNS],
    ]
    # Grouped by a number per call (group_numbers), not by the two text keys: one median over the sweep's 500 k
    # calls held +40 MB by the keys, the whole aggregation +65 MB, the analysis' peak. Lazily, a few aggregations
    # at a time: only the columns a pass reads are touched (a column of one value, kept once in the call table, is
    # not spread out per call), and one pass's are held (sweep: +20-25 MB for the same 0.1 s).
    keys, number = group_numbers(c, ("shape", "backend"))
    rows = c.lazy().drop("shape", "backend").with_columns(number)
    del number
    agg = keys
    for at in range(0, len(aggs), _AGGS_AT_ONCE):
        agg = agg.join(rows.group_by("_g").agg(aggs[at : at + _AGGS_AT_ONCE]).collect(), on="_g", how="left")
    del rows
    agg = agg.drop("_g")
    agg = agg.join(shape_work(agg["shape"].unique().to_list()), on="shape", how="left")
    # the best of the competitors: a same-program twin a hair faster is not "the best" (verdicts)
    verdicts = shape_verdicts(agg, samples if samples is not None else call_samples(c, time), same_program)
    best = pl.col("median_us").filter(pl.col("verdict").fill_null("") != "same program").min().over("shape")
    agg = (
        agg.with_columns(*bound_columns(peak_bytes_per_s, compute_peak))
        .join(verdicts, on=["shape", "backend"], how="left")
        .with_columns((pl.col("median_us") / best).alias("ratio_to_best"))
    )
    return (
        agg.join(_rounds(c, time), on=["shape", "backend"], how="left").select(SUMMARY_COLUMNS).pipe(in_context_order)
    )


# aggregations per pass over the calls (summarize): each pass holds the columns it reads
_AGGS_AT_ONCE = 6


def in_context_order(summary: pl.DataFrame) -> pl.DataFrame:
    """*summary* in the one order every surface shows and writes it (terminal, summary.csv|json of profile and
    compare, HTML): shapes of a family by ctx (8k, 32k, 131k, …, not as text: 131k, 32k, 512k; :func:`shape_key`),
    the fastest backend first within a shape."""
    if summary.height == 0 or "shape" not in summary.columns:
        return summary
    shapes = sorted(summary["shape"].unique().to_list(), key=shape_key)
    order = pl.DataFrame({"shape": shapes}, schema={"shape": summary.schema["shape"]}).with_row_index("_order")
    keys = [k for k in ("_order", "median_us", "backend") if k == "_order" or k in summary.columns]
    return (
        summary.join(order, on="shape", how="left", maintain_order="left")
        .sort(keys, nulls_last=True, maintain_order=True)
        .drop("_order")
    )


def _rounds(c: pl.DataFrame, time: str = "gpu_span_ns") -> pl.DataFrame:
    """Round wins and direction consistency, where calls carry arms and iterations."""
    # an iteration number held by one call only is no round of two arms (the filter below): left out first, as
    # grouping a million calls by (shape, backend, iter) costs a second where every call has its own number.
    # The numbers held twice or more are found in order, not hashed: a hash of 500 k distinct numbers (the sweep,
    # where every call has its own) held ~30 MB, the analysis' peak, to find none
    held = c.select(pl.col("iter").drop_nulls().sort()).to_series()
    twice = held.filter(held == held.shift(1)).unique()
    del held
    per = (
        c.select("shape", "backend", "iter", time)
        .filter(pl.col("iter").is_in(twice.implode()))
        .group_by("shape", "backend", "iter")
        .agg(pl.col(time).min().alias("gpu_span_ns"))
    )
    if per.height == 0:
        return pl.DataFrame(schema={"shape": pl.String, "backend": pl.String, "iteration_wins": pl.Int64,
                                    "iterations": pl.Int64, "consistent": pl.Boolean})  # fmt: skip
    per = per.with_columns(
        (pl.col("gpu_span_ns") == pl.col("gpu_span_ns").min().over("shape", "iter")).alias("won"),
        pl.col("backend").n_unique().over("shape", "iter").alias("_arms"),
    ).filter(pl.col("_arms") > 1)  # a round needs at least two arms to compare
    medians = per.group_by("shape", "backend").agg(pl.col("gpu_span_ns").median().alias("_med"))
    leader = medians.sort("_med").group_by("shape").first().select("shape", pl.col("backend").alias("_lead"))
    lead_t = (
        per.join(leader, on="shape")
        .filter(pl.col("backend") == pl.col("_lead"))
        .select("shape", "iter", pl.col("gpu_span_ns").alias("_lead_t"))
    )
    vs = per.join(lead_t, on=["shape", "iter"], how="left").join(medians, on=["shape", "backend"])
    return vs.group_by("shape", "backend").agg(
        pl.col("won").sum().cast(pl.Int64).alias("iteration_wins"),
        pl.len().cast(pl.Int64).alias("iterations"),
        # the same side of the leader in every round (the leader itself is trivially consistent)
        ((pl.col("gpu_span_ns") >= pl.col("_lead_t")).all() | (pl.col("gpu_span_ns") <= pl.col("_lead_t")).all()).alias(
            "consistent"
        ),
    )
