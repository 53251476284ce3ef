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
from traceattr.core.keys import scatter_rows

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

    Where no two ops of a group overlap (most calls: one kernel after another), a role's exposed time is
    its ops' summed time and idle the rest of the span. The other groups go through a sweep over their
    sorted start (+1) and end (−1) events with a running count per role: every op's +1 and −1 lie in its
    group, so the counts are back to zero at each group's end and one running sum serves every group.
    """
    return _exposure(_in_order(ops.select(group, "start", "end", "role"), group, "start"), group)


def _in_order(ops: pl.DataFrame, group: str, *by: str) -> pl.DataFrame:
    """*ops* sorted by *group*, then *by*, with *group* flagged sorted: group-bys on it take runs, not a hash."""
    return ops.sort(group, *by).with_columns(pl.col(group).set_sorted())


def _exposure(ordered: pl.DataFrame, group: str) -> pl.DataFrame:
    """:func:`exposure` of ops already :func:`_in_order` by group and start."""
    schema = pl.Schema({group: ordered.schema[group], **dict.fromkeys((*EXPOSED_COLUMNS, "idle_ns"), pl.Int64())})
    if ordered.height == 0:
        return pl.DataFrame(schema=schema)
    # ops in start order overlap nowhere in a group when each ends by the time the next one starts (then each
    # ends after every earlier one: no window expression needed); an op ending before it starts goes to the sweep
    nxt = pl.col("start").shift(-1)
    overlaps = ((pl.col(group) == pl.col(group).shift(-1)) & (pl.col("end") > nxt)) | (pl.col("end") < pl.col("start"))
    crossed = ordered.filter(overlaps)[group].unique()
    if crossed.len() == 0:
        return _laid_end_to_end(ordered, group).cast(schema)
    inside = pl.col(group).is_in(crossed.implode())
    parts = [_laid_end_to_end(ordered.filter(~inside), group), _swept(ordered.filter(inside), group)]
    return pl.concat([p.cast(schema) for p in parts])


def _laid_end_to_end(ops: pl.DataFrame, group: str) -> pl.DataFrame:
    """:func:`exposure` of groups whose ops never overlap: sums, no sweep (an op of no role is idle time)."""
    took, role = pl.col("end") - pl.col("start"), pl.col("role")
    return ops.group_by(group).agg(
        *[pl.when(role == r).then(took).otherwise(0).sum().alias(f"{r}_exposed_ns") for r in ROLES],
        pl.lit(0, pl.Int64).alias("overlap_ns"),
        (pl.col("end").max() - pl.col("start").min() - took.filter(role.is_not_null()).sum()).alias("idle_ns"),
    )


def _swept(ops: pl.DataFrame, group: str) -> pl.DataFrame:
    """:func:`exposure` by the sweep over start and end events (any overlap)."""
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
    return swept.group_by(group).agg(
        *only,
        pl.col("_len").filter(active >= 2).sum().alias("overlap_ns"),
        pl.col("_len").filter(active == 0).sum().alias("idle_ns"),
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


def stream_free_at(gpu_ops: pl.DataFrame) -> pl.Series:
    """:func:`stream_free` in op_id order (op_id == row, as the loader numbers ops): one value per op.

    The same values from the sort order and two columns gathered by it, not a sorted copy of six columns and
    a running max per (device, context, stream) group: each stream's ends are lifted above the last stream's,
    so one running max over all of them restarts at every stream (sweep: 100 -> ~45 MB of scratch)."""
    n = gpu_ops.height
    order = gpu_ops.select(pl.arg_sort_by(*STREAM, "start", "op_id", nulls_last=True)).to_series()
    keys = gpu_ops.select([pl.col(c).gather(order) for c in STREAM])
    first = keys.select(pl.any_horizontal(pl.col(c).ne_missing(pl.col(c).shift(1)) for c in STREAM)).to_series()
    del keys
    ends = gpu_ops["end"].gather(order)
    lo, hi = ends.min(), ends.max()
    streams = int(first.sum())
    if ends.null_count() or not isinstance(lo, int) or not isinstance(hi, int) or streams * (hi - lo + 1) >= 1 << 62:
        free = stream_free(gpu_ops)  # unlifted (a NULL end, or ends too far apart to lift): the grouped max
        return scatter_rows(free, "op_id", n).to_series()
    lift = (first.cum_sum().cast(pl.Int64) * (hi - lo + 1)).alias("_lift")
    before = (
        pl.DataFrame([ends - lo, lift, first.alias("_first")])
        .select(
            pl.when(~pl.col("_first")).then((pl.col("end") + pl.col("_lift")).cum_max().shift(1) - pl.col("_lift") + lo)
        )
        .to_series()
    )
    return pl.repeat(None, n, dtype=pl.Int64, eager=True).scatter(order, before).alias("stream_free_ns")


def record_calls(api: pl.DataFrame, strings: pl.DataFrame) -> pl.DataFrame:
    """The CUDA API calls that record an event (``global_tid``, ``start``, ``end``), by start: all that the
    event columns read of the API table, so a caller can let the table go."""
    names = strings.filter(pl.col("value").str.contains(_EVENT_RECORD))["id"].cast(api.schema["name_id"])
    return api.filter(pl.col("name_id").is_in(names.implode())).select("global_tid", "start", "end").sort("start")


def owners(tree: pl.DataFrame, calls: pl.Series, *, nested: bool) -> pl.DataFrame:
    """(range_id, call_id): the ranges whose ops each call of *calls* owns: in ``nsys`` mode (*nested*) its range
    and every range nested in it (*tree*: ``range_id, parent_id``), else its own only."""
    return subtrees(tree, calls) if nested else pl.DataFrame({"range_id": calls, "call_id": calls})


def op_times(owner: pl.DataFrame, placement: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """Per call of *owner* (:func:`owners`): the EXPOSED and BASIS columns, and ``stream_free_ns`` before its first
    op. *placement*: ``op_id, range_id, role`` per op; *ops*: ``start, end, stream_free_ns`` per op, op_id == row.
    """
    mine = placement.select("op_id", "range_id", "role").join(owner, on="range_id", how="inner")
    mine = mine.hstack(ops.select("start", "end", "stream_free_ns")[mine["op_id"]].get_columns())
    mine = _in_order(mine, "call_id", "start", "op_id")
    first = mine.filter(pl.col("call_id").ne_missing(pl.col("call_id").shift(1))).select("call_id", "stream_free_ns")
    return (
        _exposure(mine, "call_id")
        .drop("idle_ns")
        .join(_bases(mine), on="call_id", how="left")
        .join(first, on="call_id", how="left")
    )


def event_records(calls: pl.DataFrame, ranges: pl.DataFrame, records: pl.DataFrame) -> pl.DataFrame:
    """Per call with two or more event records inside its range on its thread: the first's and last's end
    (``_rec_first``, ``_rec_last``). *ranges*: ``range_id, global_tid, start, end``; *records*: :func:`record_calls`."""
    schema = pl.Schema({"call_id": pl.Int64, "_rec_first": pl.Int64, "_rec_last": pl.Int64})
    if records.height == 0 or calls.height == 0:
        return pl.DataFrame(schema=schema)
    spans = (
        ranges.join(calls.select(pl.col("call_id").alias("range_id")), on="range_id", how="semi")
        .filter(pl.col("end").is_not_null())
        .select(
            pl.col("range_id").alias("call_id"), "global_tid", pl.col("start").alias("_rs"), pl.col("end").alias("_re")
        )
    )
    if spans.height == 0:
        return pl.DataFrame(schema=schema)
    # only the records inside the calls' time: a window of a trace looks at its own
    first_start, last_end = spans.select(pl.col("_rs").min(), pl.col("_re").max()).row(0)
    lo, hi = records["start"].search_sorted(first_start, "left"), records["start"].search_sorted(last_end, "right")
    rec = records.slice(lo, hi - lo)
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


def with_queue_times(calls: pl.DataFrame) -> pl.DataFrame:
    """*calls* (``gpu_start_ns, gpu_span_ns, launch_latency_ns, stream_free_ns, _rec_first, _rec_last``) with the
    QUEUE columns added."""
    start, end = pl.col("gpu_start_ns"), pl.col("gpu_start_ns") + pl.col("gpu_span_ns")
    first_api = start - pl.col("launch_latency_ns")
    free = pl.col("stream_free_ns")
    queue = (pl.min_horizontal(free, start) - first_api).clip(lower_bound=0).fill_null(0)
    recorded = pl.col("_rec_first").is_not_null()
    return calls.with_columns(queue.alias("queue_wait_ns")).with_columns(
        (pl.col("launch_latency_ns") - pl.col("queue_wait_ns")).alias("launch_overhead_ns"),
        (start - free).clip(lower_bound=0).alias("stream_idle_before_ns"),
        pl.when(recorded).then(start - pl.max_horizontal("_rec_first", free)).alias("event_lead_ns"),
        pl.when(recorded).then(pl.max_horizontal("_rec_last", end) - end).alias("event_tail_ns"),
    )


def _bases(ops: pl.DataFrame) -> pl.DataFrame:
    """Per call: the spans of its non-flush ops and of its attention/reduce ops, and its op time in nested ranges."""
    role = pl.col("role")

    def span(keep: pl.Expr) -> pl.Expr:
        return pl.col("end").filter(keep).max() - pl.col("start").filter(keep).min()

    return (
        ops.group_by("call_id")
        .agg(
            span(role != "flush").alias("work_span_ns"),
            span((role == ATTENTION_ROLES[0]) | (role == ATTENTION_ROLES[1])).alias("attention_span_ns"),
            (pl.col("end") - pl.col("start")).filter(pl.col("range_id") != pl.col("call_id")).sum().alias("nested_ns"),
        )
        .cast({c: pl.Int64 for c in BASIS_COLUMNS})
    )
