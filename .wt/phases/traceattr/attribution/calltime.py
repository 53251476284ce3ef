"""What a call's GPU time is made of, and what came before its first op (pure polars).

**Exposed time.** A call's GPU span (first op start → last op end) is cut
at every op start and end; each piece goes to the one role running then
(``<role>_exposed_ns``), to ``overlap_ns`` when ops of two or more roles run
at once (FlashMLA's combine kernel starts before its split kernel ends), or
to idle (no op runs: the range table's ``gap_ns``). The parts partition the
span exactly: span = Σ exposed + overlap + gap, in integer ns. Two ops of
one role that overlap (two streams) count once, as that role's exposed time.

**Before the first op.** ``launch_latency_ns`` (first launch call start →
first op start) is split into ``queue_wait_ns``, the part during which the
op's stream was still busy with earlier work (the previous op on the same
device, context and stream ended after the launch call was made: the CPU
ran ahead), and ``launch_overhead_ns``, the rest (call → op start with the
stream free). ``stream_idle_before_ns`` is how long that stream sat idle
between its previous op and the call's first op.

**CUDA events.** Events recorded around the call (``cudaEventRecord`` on
the call's thread inside its range, as traceattr's runner does) complete
when the stream reaches them: the start event at max(its record call's end,
the end of the stream's previous op), the stop event at max(its record
call's end, the call's last op end). ``event_lead_ns`` (start event → first
op) and ``event_tail_ns`` (last op end → stop event) are what the event
interval adds to the span, so event − span = lead + tail, up to the record
call's own submission time.
"""

from __future__ import annotations

import polars as pl

from traceattr.attribution.roles import ROLES

EXPOSED_COLUMNS = (*(f"{r}_exposed_ns" for r in ROLES), "overlap_ns")
# what else a call's time can be (``--time``): the span of its ops other than flush-role ones (work), of its
# attention and reduce ops (attention); and the op time inside ranges nested in it (what a note names)
BASIS_COLUMNS = ("work_span_ns", "attention_span_ns", "nested_ns")
ATTENTION_ROLES = ("attention", "reduce")
LAUNCH_COLUMNS = ("launch_overhead_ns", "queue_wait_ns", "stream_idle_before_ns")
EVENT_COLUMNS = ("event_lead_ns", "event_tail_ns")
QUEUE_COLUMNS = (*LAUNCH_COLUMNS, *EVENT_COLUMNS)
STREAM = ("device_id", "context_id", "stream_id")
_EVENT_RECORD = r"^cu(da)?EventRecord"  # runtime cudaEventRecord[WithFlags]_v…, driver cuEventRecord[WithFlags]


def subtrees(ranges: pl.DataFrame, roots: pl.Series) -> pl.DataFrame:
    """(range_id, call_id): each root range and every range nested in it (one join per nesting level)."""
    tree = ranges.filter(pl.col("range_id").is_not_null()).select("range_id", "parent_id")
    frontier = pl.DataFrame({"range_id": roots, "call_id": roots})
    parts = [frontier]
    while frontier.height:
        frontier = tree.join(frontier.rename({"range_id": "parent_id"}), on="parent_id").select("range_id", "call_id")
        parts.append(frontier)
    return pl.concat(parts)


def exposure(ops: pl.DataFrame, group: str = "call_id") -> pl.DataFrame:
    """Per *group*: exposed ns per role, ``overlap_ns`` and ``idle_ns`` of ops (``start``, ``end``, ``role``).

    A sweep over the sorted start (+1) and end (−1) events with a running
    count per role. Every op's +1 and −1 lie in its group, so the counts are
    back to zero at each group's end and one running sum serves every group.
    """
    schema = pl.Schema({group: ops.schema[group], **dict.fromkeys((*EXPOSED_COLUMNS, "idle_ns"), pl.Int64())})
    if ops.height == 0:
        return pl.DataFrame(schema=schema)
    role = pl.col("role").cast(pl.String)
    edges = pl.concat(
        [
            ops.select(group, pl.col("start").alias("_t"), role.alias("_r"), pl.lit(1, pl.Int32).alias("_d")),
            ops.select(group, pl.col("end").alias("_t"), role.alias("_r"), pl.lit(-1, pl.Int32).alias("_d")),
        ]
    ).sort(group, "_t", "_d", descending=[False, False, True])  # starts first at a tie: no count dips below 0
    running = [pl.when(pl.col("_r") == r).then(pl.col("_d")).otherwise(0).cum_sum().alias(r) for r in ROLES]
    same = pl.col(group) == pl.col(group).shift(-1)
    swept = edges.with_columns(running).select(
        group,
        # the piece from this edge to the next one of the same group, in the state after this edge
        pl.when(same).then(pl.col("_t").shift(-1) - pl.col("_t")).otherwise(0).alias("_len"),
        *[(pl.col(r) > 0).alias(r) for r in ROLES],
    )
    active = pl.sum_horizontal([pl.col(r).cast(pl.Int32) for r in ROLES])
    only = [pl.col("_len").filter(pl.col(r) & (active == 1)).sum().alias(f"{r}_exposed_ns") for r in ROLES]
    return (
        swept.group_by(group)
        .agg(
            *only,
            pl.col("_len").filter(active >= 2).sum().alias("overlap_ns"),
            pl.col("_len").filter(active == 0).sum().alias("idle_ns"),
        )
        .cast(schema)
    )


def stream_free(gpu_ops: pl.DataFrame) -> pl.DataFrame:
    """Per op: ``stream_free_ns``, the latest end of the ops that started before it on its stream.

    null for a stream's first op. The latest end, not the previous op's: an
    op launched as a programmatic dependent (FlashMLA's combine) starts before
    the op ahead of it ends.
    """
    return (
        gpu_ops.select("op_id", "start", "end", *STREAM)
        .sort(*STREAM, "start", "op_id", nulls_last=True)
        .select("op_id", pl.col("end").cum_max().shift(1).over(STREAM).alias("stream_free_ns"))
    )


def call_times(
    calls: pl.DataFrame,
    gpu_ops: pl.DataFrame,
    placement: pl.DataFrame,
    ranges: pl.DataFrame,
    api: pl.DataFrame,
    strings: pl.DataFrame,
    *,
    nested: bool,
) -> pl.DataFrame:
    """Per call (``call_id``, ``gpu_start_ns``, ``gpu_span_ns``, ``launch_latency_ns``): EXPOSED and QUEUE columns.

    *nested*: a call owns the ops of the ranges nested in it (``nsys`` mode),
    else only its own (``innermost``). *ranges* is the trace's NVTX table
    (``range_id``, ``parent_id``, ``global_tid``, ``start``, ``end``).
    """
    ids = calls["call_id"]
    owner = subtrees(ranges, ids) if nested else pl.DataFrame({"range_id": ids, "call_id": ids})
    ops = (
        placement.select("op_id", "range_id", "role")
        .join(owner, on="range_id", how="inner")
        .join(gpu_ops.select("op_id", "start", "end"), on="op_id", how="inner")
    )
    parts = exposure(ops).drop("idle_ns").join(_bases(ops), on="call_id", how="left")
    first = (
        ops.sort("call_id", "start", "op_id")
        .unique("call_id", keep="first")
        .join(stream_free(gpu_ops), on="op_id", how="left")
        .select("call_id", "stream_free_ns")
    )
    start, end = pl.col("gpu_start_ns"), pl.col("gpu_start_ns") + pl.col("gpu_span_ns")
    first_api = start - pl.col("launch_latency_ns")
    free = pl.col("stream_free_ns")
    queue = (pl.min_horizontal(free, start) - first_api).clip(lower_bound=0).fill_null(0)
    timed = (
        calls.select("call_id", "gpu_start_ns", "gpu_span_ns", "launch_latency_ns")
        .join(first, on="call_id", how="left")
        .join(_event_records(calls, ranges, api, strings), on="call_id", how="left")
        .with_columns(queue.alias("queue_wait_ns"))
        .with_columns(
            (pl.col("launch_latency_ns") - pl.col("queue_wait_ns")).alias("launch_overhead_ns"),
            (start - free).clip(lower_bound=0).alias("stream_idle_before_ns"),
            (start - pl.max_horizontal("_rec_first", free)).alias("event_lead_ns"),
            (pl.max_horizontal("_rec_last", end) - end).alias("event_tail_ns"),
        )
        .with_columns(
            [
                pl.when(pl.col("_rec_first").is_not_null()).then(pl.col(c)).alias(c)
                for c in ("event_lead_ns", "event_tail_ns")
            ]
        )
    )
    return timed.join(parts, on="call_id", how="left").select(
        "call_id", *EXPOSED_COLUMNS, *QUEUE_COLUMNS, *BASIS_COLUMNS
    )


def _bases(ops: pl.DataFrame) -> pl.DataFrame:
    """Per call: the spans of its non-flush ops and of its attention/reduce ops, and its op time in nested ranges."""
    role = pl.col("role").cast(pl.String)

    def span(keep: pl.Expr) -> pl.Expr:
        return pl.col("end").filter(keep).max() - pl.col("start").filter(keep).min()

    return (
        ops.group_by("call_id")
        .agg(
            span(role != "flush").alias("work_span_ns"),
            span(role.is_in(ATTENTION_ROLES)).alias("attention_span_ns"),
            (pl.col("end") - pl.col("start")).filter(pl.col("range_id") != pl.col("call_id")).sum().alias("nested_ns"),
        )
        .cast({c: pl.Int64 for c in BASIS_COLUMNS})
    )


def _event_records(calls: pl.DataFrame, ranges: pl.DataFrame, api: pl.DataFrame, strings: pl.DataFrame) -> pl.DataFrame:
    """Per call with two or more event records inside its range on its thread: the first's and last's end."""
    schema = pl.Schema({"call_id": pl.Int64, "_rec_first": pl.Int64, "_rec_last": pl.Int64})
    names = strings.filter(pl.col("value").str.contains(_EVENT_RECORD))["id"].cast(api.schema["name_id"])
    rec = api.filter(pl.col("name_id").is_in(names.implode())).select("global_tid", "start", "end")
    if rec.height == 0:
        return pl.DataFrame(schema=schema)
    spans = (
        ranges.join(calls.select(pl.col("call_id").alias("range_id")), on="range_id", how="semi")
        .filter(pl.col("end").is_not_null())
        .select(
            pl.col("range_id").alias("call_id"), "global_tid", pl.col("start").alias("_rs"), pl.col("end").alias("_re")
        )
    )
    rec = rec.sort("start")
    # as-of joins, not a join on the thread: a thread can record millions of events
    first = spans.sort("_rs").join_asof(
        rec, left_on="_rs", right_on="start", by="global_tid", strategy="forward", check_sortedness=False
    )
    last = spans.sort("_re").join_asof(
        rec, left_on="_re", right_on="start", by="global_tid", strategy="backward", check_sortedness=False
    )
    return (
        first.select("call_id", "_re", pl.col("start").alias("_s1"), pl.col("end").alias("_rec_first"))
        .join(
            last.select("call_id", "_rs", pl.col("start").alias("_s2"), pl.col("end").alias("_rec_last")), on="call_id"
        )
        .filter(
            (pl.col("_rec_first") <= pl.col("_re"))
            & (pl.col("_s2") >= pl.col("_rs"))
            & (pl.col("_rec_last") <= pl.col("_re"))
            & (pl.col("_s1") < pl.col("_s2"))
        )
        .select(list(schema))
        .cast(schema)
    )
