"""One row per measured call: which backend, shape, arm and iteration, and its GPU time.

A call is a range that launched GPU work and whose message a *grouping*
(:mod:`traceattr.core.callnames`) reads as backend + shape (+ iteration, arm). With
no grouping given, the presets of ``callnames.AUTO`` are tried in order
(traceattr's own names first) and the first that reads any range is used.
A shape label the shape grammar parses is shown in its short form
(``q8_ctx900k``), except traceattr's own, which are kept as the runner wrote them.

A grouping given with ``--group`` is matched against each range's message
(its text without the ``domain:`` prefix); when it reads no range that way, it
is matched against the name as nsys shows it, ``domain:message``
(``sweep:fa3|h16_q1_ctx32768|3``), so a regex written against either works.
When it reads none either way, the error shows what a name here looks like.

When no preset reads any range (a trace whose ranges are not a benchmark),
each top-level range is its own *series* (its name without per-instance
counters, :func:`series_names`, and without a trailing ``:3``/``#3``/``_3``
iteration), with no backend or shape: the report can still draw it, and
:func:`grouping_note` says there is nothing to compare.
"""

from __future__ import annotations

import contextlib

import polars as pl

from traceattr.attribution.calltime import BASIS_COLUMNS, EXPOSED_COLUMNS, QUEUE_COLUMNS, call_times
from traceattr.attribution.engine import ROLE_COLUMNS, Attribution
from traceattr.core.callnames import (
    AUTO,
    BETWEEN,
    FLUSH,
    HOLD,
    LEAD,
    WARMUP,
    checked_group,
    group_fields,
    series_and_iteration,
    shape_runs,
    without_counters,
)  # fmt: skip
from traceattr.core.errors import TraceattrError
from traceattr.core.shapes import ShapeError, parse_shape

UNNAMED = "[unnamed range]"
CALL_COLUMNS = (
    "call_id", "name", "series", "backend", "shape", "arm", "iter",
    "gpu_start_ns", "gpu_span_ns", "busy_ns", "gap_ns", *EXPOSED_COLUMNS, "kernel_sum_ns", "gpu_sum_ns",
    "launch_latency_ns", *QUEUE_COLUMNS, "kernels", "gpu_ops", *ROLE_COLUMNS, *BASIS_COLUMNS,
)  # fmt: skip


# traceattr's own arm letter (``arm=B``): which slot of the ABBA order a call ran in, not which call it is
_ARM_WORD = r" arm=\S+"


def series_names(names: pl.Expr) -> pl.Expr:
    """Range names as *call series*: without per-instance counters (``iter=``, PyTorch's ``, seq = N`` and
    ``, op_id = N``) and traceattr's ``arm=`` word, so every instance of one call reads alike
    (``traceattr:backend=fa3 shape=q8_ctx900k arm=A iter=3`` -> ``traceattr:backend=fa3 shape=q8_ctx900k``)."""
    return without_counters(names).str.replace_all(_ARM_WORD, "")


def call_series(names: pl.Expr) -> pl.Expr:
    """The call series each range name belongs to: :func:`series_names`, then without a trailing iteration
    after a separator (``probe:fa2_q8_ctx917504:3`` -> ``probe:fa2_q8_ctx917504``): every instance of one
    call under one name, as ``attribute`` lists them and a non-benchmark trace's calls are grouped."""
    bare = series_names(names)
    return series_and_iteration(bare).struct.field("series").fill_null(bare)


def calls(att: Attribution, group: str | None = None) -> pl.DataFrame:
    """Measured calls of *att* in time order; *group*: a preset name or regex (see module doc)."""
    # a range that never closed has no duration of its own (it ends where the trace does): no call, as in nsys;
    # nor one whose ops all last 0 ns (zero-length kernels, noted at load): it measured no time to compare
    worked = pl.col("range_id").is_not_null() & (pl.col("gpu_ops") > 0)
    ranges = att.ranges.filter(worked & pl.col("closed") & (pl.col("gpu_sum_ns") > 0))
    if ranges.height == 0 and (left_out := att.ranges.filter(worked)).height:
        unclosed = int((~left_out["closed"]).sum())
        why = {0: "lasts 0 ns (its GPU ops all do)", left_out.height: "never closed (no end time; nsys projects none)"}
        raise TraceattrError(
            f"{att.meta.path}: every NVTX range with GPU work ({left_out.height:,}) "
            f"{why.get(unclosed, 'never closed or lasts 0 ns')}: no call has a duration"
        )
    ranges = ranges.with_columns(
        pl.col("name").fill_null(UNNAMED)  # a range without text is still a call, shown by this label
    )
    ranges = ranges.with_columns(pl.coalesce("message", "name").alias("_text"))
    for preset in (group,) if group is not None else AUTO:
        pattern = checked_group(preset)
        picked = _grouped(ranges, pattern, keep_shape=preset == "traceattr")
        if picked.height == 0 and group is not None:  # a regex written against the name nsys shows
            picked = _grouped(ranges.with_columns(pl.col("name").alias("_text")), pattern, keep_shape=False)
        if picked.height:
            break
    else:
        if group is not None:
            raise TraceattrError(
                f"{att.meta.path}: --group {group!r} read no range with GPU work as backend + shape, neither its "
                f"message nor its domain:message{_example_name(ranges)}"
                + (" (the --domain/--match filter applies first)" if att.selected else "")
            )
        picked = _series(ranges)
    picked = picked.rename({"range_id": "call_id"})
    trace = att.trace
    times = call_times(picked, trace.gpu_ops, att.placement, trace.ranges.join(att.call_tree, on="range_id", how="left"),
                       trace.api, trace.strings, nested=att.mode == "nsys")  # fmt: skip
    return picked.join(times, on="call_id", how="left").select(CALL_COLUMNS).sort("gpu_start_ns")


def _example_name(ranges: pl.DataFrame) -> str:
    """``; a name here reads 'sweep:fa3|q1|3' (message 'fa3|q1|3')``: what --group is matched against."""
    if ranges.height == 0:
        return "; no range here launched GPU work"
    row = ranges.sort("gpu_ops", descending=True).row(0, named=True)  # a call, more likely than a wrapper
    message = row["message"]
    name = row["name"]
    return f"; a name here reads {name!r}" + (f" (message {message!r})" if message and message != name else "")


def _grouped(ranges: pl.DataFrame, pattern: str, *, keep_shape: bool) -> pl.DataFrame:
    fields = group_fields(pattern)
    parts = ranges.select(pl.col("_text").str.extract_groups(pattern).alias("_g"))
    g = pl.col("_g").struct
    picked = ranges.with_columns(parts["_g"]).filter(
        g.field("backend").is_not_null() & (g.field("backend") != "") & g.field("shape").is_not_null()
    )
    picked = picked.with_columns(
        g.field("backend").alias("backend"),
        g.field("shape").alias("shape"),
        (g.field("arm") if "arm" in fields else pl.lit(None, pl.String)).alias("arm"),
        (g.field("iter").cast(pl.Int64, strict=False) if "iter" in fields else pl.lit(None, pl.Int64)).alias("iter"),
    )
    if not keep_shape:
        picked = picked.join(_short_shapes(picked["shape"]), on="shape", how="left").with_columns(
            pl.col("_short").fill_null(pl.col("shape")).alias("shape")
        )
    return picked.with_columns(pl.format("{} {}", "backend", "shape").alias("series"))


def _short_shapes(labels: pl.Series) -> pl.DataFrame:
    """label -> short shape name, for the labels the shape grammar parses (one parse per distinct label)."""
    rows = []
    for label in labels.unique().drop_nulls().to_list():
        with contextlib.suppress(ShapeError):
            rows.append((label, parse_shape(label).short_name))
    return pl.DataFrame(rows, schema={"shape": pl.String, "_short": pl.String}, orient="row")


def _series(ranges: pl.DataFrame) -> pl.DataFrame:
    """Top-level ranges as series of their own, an iteration split off only after a separator."""
    skip = pl.col("message").is_in([FLUSH, BETWEEN, HOLD, LEAD]) | pl.col("message").str.starts_with(WARMUP)
    top = ranges.filter((pl.col("level") == 0) & ~skip.fill_null(False))
    parts = series_and_iteration(series_names(pl.col("name")))
    return top.with_columns(
        call_series(pl.col("name")).alias("series"),
        parts.struct.field("iter").cast(pl.Int64).alias("iter"),
        pl.lit(None, pl.String).alias("backend"),
        pl.lit(None, pl.String).alias("shape"),
        pl.lit(None, pl.String).alias("arm"),
    )


def grouping_note(calls: pl.DataFrame) -> str | None:
    """One line when *calls* cannot be compared (so no winner may be printed), else None.

    Nothing to compare when no name reads as backend + shape, when one
    (shape, backend) group mixes names of different shapes (the grouping's
    shape part takes too little), or when no shape has two or more backends.
    """
    if calls.height == 0:
        return None
    hint = "give --group with a preset or a regex (traceattr shapes lists them)"
    named = calls.filter(pl.col("shape").is_not_null())
    if named.height == 0:
        examples = ", ".join(repr(s) for s in calls["series"].unique(maintain_order=True).head(2).to_list())
        return f"no range name reads as a backend and a shape (e.g. {examples}): nothing to compare; {hint}"
    runs = named.select("shape", "backend", shape_runs(pl.col("name")).alias("_runs"))
    mixed = (
        runs.group_by("shape", "backend")
        .agg(pl.col("_runs").unique().sort().alias("_seen"))
        .filter(pl.col("_seen").list.len() > 1)
        .sort("shape", "backend")
    )
    if mixed.height:
        row = mixed.row(0, named=True)
        seen = ", ".join(sorted({s.strip(" _/|.:#,=-") for s in row["_seen"]})[:3])
        return (
            f"calls grouped as {row['backend']} · {row['shape']} carry different shapes in their names ({seen}): "
            f"the grouping's shape takes too little of the name; nothing compared; {hint}"
        )
    if not comparable_shapes(named):
        return (
            f"no shape was measured by two or more backends ({named['shape'].n_unique()} shape(s), one backend each): "
            f"nothing to compare; {hint}"
        )
    return None


# Which shapes are compared: here, beside the call table, so that reading a report's calls (many
# reports' workers) needs no statistics (scipy takes seconds to import).
def comparable() -> pl.Expr:
    """True on the rows (calls or summary rows) of a shape measured with two or more backends: the only shapes
    compared, so the only ones with a winner, a tie or a rule."""
    return pl.col("backend").n_unique().over("shape") > 1


def comparable_shapes(frame: pl.DataFrame) -> list[str]:
    """The shapes of *frame* (calls or summary rows) that are :func:`comparable`, sorted."""
    return sorted(frame.filter(pl.col("shape").is_not_null() & comparable())["shape"].unique().to_list())
