"""The frames the report draws, computed once from an attribution (pure polars).

Everything that can be large is selected here, before any figure is built:
the calls drawn as points, the calls offered in the timeline and their ops.
Where a cap applies the selection says so in a note; nothing is dropped
silently. Statistics (medians, boxes, ratios) always use every call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceattr.analysis.calls import CallsAgain, comparable_shapes
from traceattr.analysis.crossover import with_family
from traceattr.analysis.decision import Decision
from traceattr.analysis.pipeline import analyse
from traceattr.analysis.roofline import ComputePeak
from traceattr.analysis.summary import PART_COLUMNS, PARTS
from traceattr.analysis.verdicts import SameProgram, same_label
from traceattr.attribution.calltime import subtrees
from traceattr.attribution.engine import Attribution
from traceattr.core.errors import NoDataError
from traceattr.core.keys import group_numbers
from traceattr.present.formats import us_from_ns

GROUP = ("shape", "backend")
# each (shape, backend) as one number (core.keys.group_numbers): the windows over the calls (the median call, the
# points evenly in time, the boxes) group by it, not by the two text keys
_KEY = "_group"


@dataclass(frozen=True)
class Limits:
    """How much the report draws; above these it samples and says so in the section."""

    shapes: int = 24  # shapes drawn in the figures: those with the most GPU time
    table_rows: int = 400  # rows of the numbers table: the (shape, backend) pairs of the most GPU time
    strip_points: int = 200  # calls drawn as points per (shape, backend) in the distributions
    timeline_calls: int = 200  # calls offered one by one in the timeline picker
    call_ops: int = 2000  # bars of one call in the timeline (the longest ops are kept)
    timeline_bars: int = 5000  # bars over all timeline views together

    def __post_init__(self) -> None:
        for name in ("shapes", "table_rows", "strip_points", "timeline_calls", "call_ops", "timeline_bars"):
            if getattr(self, name) < 1:
                raise ValueError(f"Limits.{name} must be at least 1")


@dataclass(frozen=True)
class TimelineView:
    """One choice of the timeline picker: one call, or one shape's median calls side by side."""

    label: str  # raw text; the renderer escapes it
    group: str
    calls: tuple[tuple[int, str], ...]  # (call_id, lane prefix)


@dataclass(frozen=True)
class TimelineData:
    views: tuple[TimelineView, ...]
    ops: pl.DataFrame  # one row per drawn op: call_id, lane, x0_us, dur_us, role, names, launch config, tier(s)
    ranges: pl.DataFrame  # one row per drawn NVTX range: call_id, lane, x0_us, dur_us, name, cpu_us
    calls_total: int
    calls_shown: int


@dataclass(frozen=True)
class Totals:
    calls: int
    backends: int  # read from the range names
    shapes: int
    unnamed: int = 0  # series whose names give no backend and shape (each is its own backend and shape)


@dataclass(frozen=True)
class ReportData:
    calls: pl.DataFrame  # analysis.calls() of the drawn shapes, shape/backend filled, is_median (the _DRAWN columns)
    summary: pl.DataFrame  # summarize() of the drawn shapes, plus the median call's parts (call_<part>_us)
    table: pl.DataFrame  # summarize() rows of the numbers table
    totals: Totals  # over every measured call, drawn or not
    peak_bytes_per_s: float | None
    peak_source: str
    boxes: pl.DataFrame  # per (shape, backend): box statistics of the call span, µs, from every call
    strip: pl.DataFrame  # the calls drawn as points (all, or evenly spaced in time)
    context: pl.DataFrame  # summary rows of shape families measured at two or more ctx
    crossovers: pl.DataFrame  # analysis.crossover.crossovers() plus at_us (time where the lines cross)
    timeline: TimelineData
    notes: dict[str, list[str]] = field(default_factory=dict)  # section id ("report": all) -> what was sampled
    compute_peak: ComputePeak | None = None  # dense FLOP/s per dtype, for the roofline's compute bound
    decision: Decision | None = None  # analysis.decision: what the decision section renders (and every surface)

    @property
    def shapes(self) -> list[str]:
        return self.summary["shape"].unique(maintain_order=True).to_list()

    @property
    def backends(self) -> list[str]:
        return sorted(self.summary["backend"].unique().to_list())


def collect(
    att: Attribution,
    peak_bytes_per_s: float | None = None,
    limits: Limits | None = None,
    group: str | None = None,
    events: list[dict[str, Any]] | None = None,
    same_program: SameProgram = same_label,
    basis: str = "span",
    calls: pl.DataFrame | None = None,
    again: CallsAgain | None = None,
) -> ReportData:
    """Every frame of the report for *att*; raises :class:`NoDataError` when no range launched GPU work.

    *events*: a runner.json's CUDA-event times, for the table's cross-check columns; *calls*: the call table,
    where made already (*att* reduced to its calls: its range table needs only
    :data:`~traceattr.attribution.columns.TIMELINE_COLUMNS`), or, with *again*
    (:func:`~traceattr.analysis.calls.calls_to_read_again`), nothing: the timeline's calls are read again).
    """
    limits = limits or Limits()
    analysis = analyse(
        att, peak_bytes_per_s=peak_bytes_per_s, group=group, events=events, same_program=same_program, basis=basis,
        calls=calls,
    )  # fmt: skip
    c = analysis.calls
    if c.height == 0:
        why = "the --domain/--match filter chose no range that" if att.selected else "no NVTX range"
        hint = " (in innermost mode a range owns only the ops of no nested range: try --mode nsys)"
        raise NoDataError(
            att.meta.path,
            f"{why} launched GPU work; the report compares calls, which are NVTX ranges with GPU work"
            + (hint if att.mode == "innermost" else ""),
        )
    # what the report reads of each call (the medians' parts, the points, the boxes, the timeline's choice): the
    # call table's other columns stay out of every frame made below (its filters copied them, 37 columns)
    c = c.select(*(d for d in _DRAWN if d != "is_median"), *PART_COLUMNS, "series")
    named = pl.col("backend").is_not_null() & pl.col("shape").is_not_null()
    labels = c.select("backend", "shape", "series")  # a filter of the whole call table would copy every column
    read = labels.filter(named)
    totals = Totals(
        c.height, read["backend"].n_unique(), read["shape"].n_unique(), labels.filter(~named)["series"].n_unique()
    )
    # the same fill as summarize(): a call whose name says no backend/shape is its own series
    c = c.with_columns(pl.col("shape").fill_null(pl.col("series")), pl.col("backend").fill_null(pl.col("series")))
    c = _mark_medians(c.drop("series").with_columns(group_numbers(c, GROUP, _KEY)[1]))
    peak, source = analysis.peak_bytes_per_s, analysis.peak_source
    # in the summary's own order (summary.in_context_order), as the terminal and summary.csv
    full = analysis.summary.join(_median_call_parts(c), on=list(GROUP), how="left", maintain_order="left")
    c = c.select(*_DRAWN, _KEY)  # what the figures and the timeline read of each call (the filters below copy it)
    # why nothing can be compared is a finding (the decision section says it); sampling notes are not
    notes: dict[str, list[str]] = {"decision": [analysis.note]} if analysis.note else {}

    # Many shapes (a trace whose ranges are not a benchmark, e.g. one range per torch op) would make
    # thousands of panels: the figures draw the shapes with the most GPU time, the table more rows.
    # Time vs context and its crossovers use every shape and call: a family's curve never loses a point.
    context = _context(full)
    crossings = crossings_at(analysis.crossovers, context)  # the very frame `compare` prints
    pair_time = c.group_by(GROUP).agg(pl.col("gpu_span_ns").sum())
    heavy = c.group_by("shape").agg(pl.col("gpu_span_ns").sum()).sort("gpu_span_ns", "shape", descending=[True, False])
    if heavy.height > limits.shapes:
        keep = heavy.head(limits.shapes)["shape"]
        c = c.filter(pl.col("shape").is_in(keep.implode()))
        notes.setdefault("report", []).append(
            f"the distributions, role bars and timeline show {limits.shapes:,} of {heavy.height:,} shapes (series), "
            "those with the most GPU time; time vs context shows every shape"
        )
    summary = full.filter(pl.col("shape").is_in(c["shape"].unique().implode()))
    table = full
    if full.height > limits.table_rows:
        pairs = (
            full.select(GROUP)
            .join(pair_time, on=list(GROUP), how="left")
            .sort("gpu_span_ns", descending=True, nulls_last=True)
            .head(limits.table_rows)
        )
        table = full.join(pairs.select(GROUP), on=list(GROUP), how="semi")
        notes.setdefault("numbers", []).append(
            f"listing {table.height:,} of {full.height:,} backend and shape pairs, those with the most GPU time"
        )

    strip = c.filter(_evenly_in_time(limits.strip_points, _KEY) | _extreme(_KEY)).drop(_KEY)
    if strip.height < c.height:
        notes.setdefault("distributions", []).append(
            f"showing {strip.height:,} of {c.height:,} calls as points: at most {limits.strip_points:,} per backend "
            "and shape, evenly spaced by time, plus the fastest and slowest; boxes use every call"
        )
    timeline, timeline_notes = _timeline(att, c, summary, limits, again)
    if timeline_notes:
        notes["timeline"] = timeline_notes
    return ReportData(
        calls=c.drop(_KEY),
        summary=summary,
        table=table,
        totals=totals,
        peak_bytes_per_s=peak,
        peak_source=source,
        boxes=_boxes(c),
        strip=strip,
        context=context,
        crossovers=crossings,
        timeline=timeline,
        notes=notes,
        compute_peak=analysis.compute_peak,
        decision=analysis.decision,
    )


# what the report reads of each call once the medians' parts are taken: the points, boxes and timeline
_DRAWN = ("call_id", "name", "shape", "backend", "iter", "gpu_start_ns", "gpu_span_ns", "launch_overhead_ns",
          "queue_wait_ns", "is_median")  # fmt: skip


# -- selections -----------------------------------------------------------------------------
def _median_call_parts(c: pl.DataFrame) -> pl.DataFrame:
    """Per (shape, backend): the median call's span and its exposed parts, µs (``call_span_us``, ``call_<part>_us``)."""
    return c.filter(pl.col("is_median")).select(
        *GROUP,
        (pl.col("gpu_span_ns") / 1e3).alias("call_span_us"),
        *[(pl.col(col) / 1e3).alias(f"call_{part}_us") for col, part in zip(PART_COLUMNS, PARTS, strict=True)],
    )


def _mark_medians(c: pl.DataFrame) -> pl.DataFrame:
    """``is_median``: the call whose span is the (lower) median of its shape and backend."""
    rank = pl.col("gpu_span_ns").rank("ordinal").over(_KEY)
    return c.with_columns((rank == (pl.len().over(_KEY) + 1) // 2).alias("is_median"))


def _evenly_in_time(k: int, by: str | Sequence[str] = GROUP) -> pl.Expr:
    """True for at most *k* calls per (shape, backend) (*by*: the columns that tell them), evenly spaced in time
    (rows in time order)."""
    n = pl.len().over(by)
    r = pl.int_range(pl.len()).over(by)  # position in time: calls() is sorted by gpu_start_ns
    kk = pl.min_horizontal(n, pl.lit(k))
    # row r is kept when it is the row nearest to one of the kk evenly spaced positions
    j = (r * (kk - 1) / pl.max_horizontal(n - 1, pl.lit(1)) + 0.5).floor()
    back = (j * (n - 1) / pl.max_horizontal(kk - 1, pl.lit(1)) + 0.5).floor()
    return (n <= k) | (back == r)


def _extreme(by: str | Sequence[str] = GROUP) -> pl.Expr:
    span = pl.col("gpu_span_ns")
    return (span == span.min().over(by)) | (span == span.max().over(by))


# -- distributions --------------------------------------------------------------------------
def _boxes(c: pl.DataFrame) -> pl.DataFrame:
    """Tukey boxes of the call span (µs) per (shape, backend): quartiles and 1.5·IQR whiskers."""
    t = pl.col("t_us")
    q = c.select(*GROUP, _KEY, (pl.col("gpu_span_ns") / 1e3).alias("t_us")).with_columns(
        t.quantile(0.25, "linear").over(_KEY).alias("q1"), t.quantile(0.75, "linear").over(_KEY).alias("q3")
    )
    iqr = pl.col("q3") - pl.col("q1")
    # by the number, in the order first seen: the same groups, in the same order, as by (shape, backend)
    return (
        q.group_by(_KEY, maintain_order=True)
        .agg(
            *[pl.col(k).first() for k in GROUP],
            pl.len().alias("n"),
            pl.col("q1").first(),
            t.median().alias("median"),
            pl.col("q3").first(),
            t.mean().alias("mean"),
            t.filter(t >= pl.col("q1") - 1.5 * iqr).min().alias("lowerfence"),
            t.filter(t <= pl.col("q3") + 1.5 * iqr).max().alias("upperfence"),
        )
        .drop(_KEY)
    )


# -- time vs context ------------------------------------------------------------------------
def _context(summary: pl.DataFrame) -> pl.DataFrame:
    """Summary rows of the shape families that were measured at two or more context lengths."""
    fam = with_family(summary)
    multi = fam.group_by("family").agg(pl.col("ctx").n_unique().alias("_n")).filter(pl.col("_n") >= 2)
    return fam.join(multi.select("family"), on="family", how="semi").sort("family", "backend", "ctx")


def crossings_at(cross: pl.DataFrame, context: pl.DataFrame) -> pl.DataFrame:
    """*cross* (analysis.crossover.crossovers) plus ``at_us``: the time at the crossing on *context*'s curves
    (log-log interpolation)."""
    if cross.height == 0:
        return cross.with_columns(pl.lit(None, pl.Float64).alias("at_us"))
    t = context.select("family", "backend", "ctx", "median_us")
    lo = t.rename({"backend": "faster_below", "ctx": "ctx_low", "median_us": "_t0"})
    hi = t.rename({"backend": "faster_below", "ctx": "ctx_high", "median_us": "_t1"})
    joined = cross.join(lo, on=["family", "faster_below", "ctx_low"], how="left").join(
        hi, on=["family", "faster_below", "ctx_high"], how="left"
    )
    frac = (pl.col("crossover_ctx").log() - pl.col("ctx_low").log()) / (
        pl.col("ctx_high").log() - pl.col("ctx_low").log()
    )
    at = (pl.col("_t0").log() + frac * (pl.col("_t1").log() - pl.col("_t0").log())).exp()
    return joined.with_columns(at.alias("at_us")).drop("_t0", "_t1")


# -- timeline -------------------------------------------------------------------------------
def _timeline(
    att: Attribution, c: pl.DataFrame, summary: pl.DataFrame, limits: Limits, again: CallsAgain | None = None
) -> tuple[TimelineData, list[str]]:
    """The calls the timeline offers, their ops (the longest, where a call has too many) and NVTX ranges; with
    *again*, the offered calls' rows read again and attributed alone, once they are chosen."""
    if again is None:
        ranges = att.ranges.filter(pl.col("range_id").is_not_null())
        sub = subtrees(ranges, c["call_id"])
        counts = (
            att.placement.select("op_id", "range_id")
            .join(sub, on="range_id")
            .group_by("call_id")
            .agg(pl.len().alias("_ops"))
        )
    else:
        counts = again.op_counts()
    # each call's op count beside it, the calls as they are (in time order, as calls() leaves them): a join of the
    # calls, then a sort, copied every column they hold twice (nested trace: +10 MB at report's peak)
    ops = c.select("call_id").join(counts, on="call_id", how="left", maintain_order="left")["_ops"]
    c = c.with_columns(ops.fill_null(0))
    if not c["gpu_start_ns"].is_sorted():
        c = c.sort("gpu_start_ns")
    # from the summary's rows, one per (shape, backend) of these shapes: the same shapes as the calls', found
    # without a window over every call's text keys
    compare_shapes = set(comparable_shapes(summary))
    chosen, per_call, notes = _choose_calls(c, compare_shapes, limits)
    if again is None:
        picked = sub.join(chosen.select("call_id"), on="call_id", how="semi")
    else:
        att = again.attribution(chosen["call_id"])
        ranges = att.ranges.filter(pl.col("range_id").is_not_null())
        picked = subtrees(ranges, chosen["call_id"])
    op_rows, range_rows, op_notes = _timeline_rows(att, ranges, picked, per_call)
    # a call's own range also carries its launch latency's split (launch overhead + queue wait)
    split = chosen.select(
        "call_id", pl.lit(0).alias("depth"),
        (pl.col("launch_overhead_ns") / 1e3).alias("launch_overhead_us"), (pl.col("queue_wait_ns") / 1e3).alias("queue_wait_us"),
    )  # fmt: skip
    range_rows = range_rows.join(split, on=["call_id", "depth"], how="left")
    views = _views(chosen, summary, compare_shapes)
    data = TimelineData(views, op_rows, range_rows, calls_total=c.height, calls_shown=chosen.height)
    return data, notes + op_notes


def calls_timeline(
    att: Attribution, views: tuple[TimelineView, ...], calls_total: int, per_call: int = 2000
) -> TimelineData:
    """The timeline of chosen calls (their range ids in *views*), drawn as the report draws its own: each call's
    ops and NVTX ranges, µs from the call's first GPU op. For pages that pick the calls themselves (a decode
    trajectory's steps); *calls_total*: how many calls there were to pick from."""
    ranges = att.ranges.filter(pl.col("range_id").is_not_null())
    ids = sorted({cid for v in views for cid, _ in v.calls})
    picked = subtrees(ranges, pl.Series("call_id", ids, dtype=pl.Int64))
    ops, nvtx, _ = _timeline_rows(att, ranges, picked, per_call)
    return TimelineData(views, ops, nvtx, calls_total=calls_total, calls_shown=len(ids))


def _choose_calls(c: pl.DataFrame, compare_shapes: set[str], limits: Limits) -> tuple[pl.DataFrame, int, list[str]]:
    """(calls offered, bars per call, notes): the medians always, then evenly spaced others while budgets allow.

    A median call of a shape with several backends is drawn twice: alone and side by side.
    """
    notes: list[str] = []
    medians = c.filter(pl.col("is_median"))
    twice = medians.filter(pl.col("shape").is_in(list(compare_shapes)))
    per_call = limits.call_ops
    median_bars = medians["_ops"].clip(upper_bound=per_call).sum() + twice["_ops"].clip(upper_bound=per_call).sum()
    if median_bars > limits.timeline_bars:
        per_call = max(1, limits.timeline_bars // max(1, medians.height + twice.height))
    per_group = max(1, limits.timeline_calls // c[_KEY].n_unique())
    while True:
        others = _evenly_in_time(per_group, _KEY) if per_group > 1 else pl.lit(False)
        chosen = c.filter(pl.col("is_median") | others)
        bars = chosen["_ops"].clip(upper_bound=per_call).sum() + twice["_ops"].clip(upper_bound=per_call).sum()
        if per_group == 1 or (bars <= limits.timeline_bars and chosen.height <= limits.timeline_calls):
            break
        per_group = max(1, per_group // 2)
    if chosen.height < c.height:
        notes.append(
            f"the picker offers {chosen.height:,} of {c.height:,} calls: the median call of each backend and shape, "
            f"plus others evenly spaced by time (limits: {limits.timeline_calls:,} calls, {limits.timeline_bars:,} bars)"
        )
    return chosen.drop(_KEY), per_call, notes


def _timeline_rows(
    att: Attribution, ranges: pl.DataFrame, picked: pl.DataFrame, per_call: int
) -> tuple[pl.DataFrame, pl.DataFrame, list[str]]:
    """Bars of the offered calls (*picked*: their (range_id, call_id)): ops and NVTX ranges, µs from the call's start."""
    notes: list[str] = []
    # the wide rows of the offered calls' ops only, in op_id order (not every op's, then joined)
    ids = att.placement.join(picked.select("range_id").unique(), on="range_id", how="semi", maintain_order="left")
    ops = att.ops_at(ids["op_id"]).join(picked, on="range_id", how="inner", maintain_order="left")
    ops = ops.with_columns(
        pl.col("start_ns").min().over("call_id").alias("_t0"),
        pl.len().over("call_id").alias("_n"),
        pl.col("duration_ns").sum().over("call_id").alias("_total"),
    )
    kept = ops.filter(pl.col("duration_ns").rank("ordinal", descending=True).over("call_id") <= per_call)
    if kept.height < ops.height:
        cut = kept.group_by("call_id").agg(pl.col("_n").first(), pl.len().alias("_k"), pl.col("duration_ns").sum(),
                                           pl.col("_total").first()).filter(pl.col("_k") < pl.col("_n"))  # fmt: skip
        share = 100 * cut["duration_ns"].sum() / max(1, cut["_total"].sum())
        notes.append(
            f"{cut.height:,} {'call has' if cut.height == 1 else 'calls have'} more than {per_call:,} GPU ops: their "
            f"timelines show the {per_call:,} longest of each ({share:.1f}% of their GPU time; "
            f"{ops.height - kept.height:,} short ops not drawn)"
        )
    lane = pl.format(
        "dev {} · stream {}",
        pl.col("device_id").cast(pl.String).fill_null("?"),
        pl.col("stream_id").cast(pl.String).fill_null("?"),
    )
    t0 = ops.group_by("call_id").agg(pl.col("_t0").first())
    op_rows = kept.select(
        "call_id",
        lane.alias("lane"),
        ((pl.col("start_ns") - pl.col("_t0")) / 1e3).alias("x0_us"),
        (pl.col("duration_ns") / 1e3).alias("dur_us"),
        pl.col("role").cast(pl.String),
        "device_id", "stream_id", "kind", "family", "name", "range_name",
        "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
        "registers_per_thread", "static_smem", "dynamic_smem", "bytes",
    ).sort("call_id", "x0_us")  # fmt: skip
    # An op that starts before an earlier op on its lane has ended (programmatic dependent launch,
    # or streams merged into one lane) goes on a second tier, so neither bar hides the other.
    end_before = (pl.col("x0_us") + pl.col("dur_us")).cum_max().shift(1).over("call_id", "lane")
    op_rows = op_rows.with_columns((end_before - pl.col("x0_us")).clip(lower_bound=0).fill_null(0).alias("overlap_us"))
    op_rows = op_rows.with_columns((pl.col("overlap_us") > 0).cast(pl.Int64).alias("tier"))
    op_rows = op_rows.with_columns((pl.col("tier").max().over("call_id", "lane") + 1).alias("tiers"))

    call_level = ranges.select("range_id", pl.col("level").alias("_call_level")).rename({"range_id": "call_id"})
    range_rows = (
        picked.join(ranges, on="range_id")
        .join(call_level, on="call_id")
        .join(t0, on="call_id")
        .filter(pl.col("gpu_start_ns").is_not_null())
        .select(
            "call_id",
            (pl.col("level") - pl.col("_call_level")).alias("depth"),
            ((pl.col("gpu_start_ns") - pl.col("_t0")) / 1e3).alias("x0_us"),
            (pl.col("gpu_span_ns") / 1e3).alias("dur_us"),
            "name",
            (pl.col("duration_ns") / 1e3).alias("cpu_us"),
            (pl.col("launch_latency_ns") / 1e3).alias("launch_us"),
            "gpu_ops",
        )
        .with_columns(
            pl.when(pl.col("depth") == 0)
            .then(pl.lit("NVTX"))
            .otherwise(pl.format("NVTX +{}", pl.col("depth")))
            .alias("lane")
        )
        .sort("call_id", "depth", "x0_us")
    )
    return op_rows, range_rows, notes


def _views(chosen: pl.DataFrame, summary: pl.DataFrame, compare_shapes: set[str]) -> tuple[TimelineView, ...]:
    """Picker entries: per shape the median calls side by side, then each (shape, backend)'s calls in time order."""
    views: list[TimelineView] = []
    order = summary.select(GROUP).with_row_index("_order")
    medians = chosen.filter(pl.col("is_median")).join(order, on=list(GROUP)).sort("_order")
    for shape in summary["shape"].unique(maintain_order=True).to_list():
        if shape not in compare_shapes:
            continue
        rows = medians.filter(pl.col("shape") == shape)
        views.append(
            TimelineView(
                label=f"{shape}: median call of each backend",
                group="Backends side by side (median call of each)",
                calls=tuple((cid, f"{b} │ ") for cid, b in rows.select("call_id", "backend").iter_rows()),
            )
        )
    ordered = chosen.join(order, on=list(GROUP)).sort("_order", "gpu_start_ns")
    for row in ordered.iter_rows(named=True):  # at most Limits.timeline_calls rows
        what = f"iter {row['iter']}" if row["iter"] is not None else row["name"]
        star = "★ median · " if row["is_median"] else ""
        views.append(
            TimelineView(
                label=f"{star}{what} · {us_from_ns(row['gpu_span_ns'])} µs",
                group=row["shape"] if row["shape"] == row["backend"] else f"{row['shape']} · {row['backend']}",
                calls=((row["call_id"], ""),),
            )
        )
    return tuple(views)
