"""nsys mode's projection on laminar threads: range metrics as preorder-subtree aggregates, no op × range pairs."""

from __future__ import annotations

import polars as pl

from traceattr.attribution.columns import METRICS_SCHEMA, ROLE_COLUMNS
from traceattr.attribution.facts import STREAM, SumPlan
from traceattr.attribution.intervals import RangeIndex, union_length
from traceattr.core.keys import gather_by_key, rows_at

# Streams and devices are counted with one running count per distinct value, so a trace with more
# distinct values than this takes the pair path.
_MAX_DISTINCT = 64


def few_distinct(gpu_ops: pl.DataFrame) -> bool:
    """Few enough streams and devices for _distinct_in_slices (one running count per value)."""
    counts = gpu_ops.select(STREAM.n_unique().alias("streams"), pl.col("device_id").n_unique()).row(0)
    return max(counts) <= _MAX_DISTINCT


def subtree_metrics(index: RangeIndex, deepest: pl.DataFrame, facts: pl.DataFrame, order: pl.Series) -> pl.DataFrame:
    """pair_metrics' columns for the laminar threads' ranges (nsys mode), without op × range pairs.

    Rows come in the order of *order* (the range table's range ids), so the range table takes the
    columns as they are when every range has ops, instead of gathering each one into its order.

    An op lies in a range exactly when its deepest range is in the range's
    subtree, and with ops sorted by their deepest range's preorder number a
    subtree's ops are one slice [lo, hi): counts and sums are differences of
    running sums, first start / last end / first call are slice minima and
    maxima (a sparse table), distinct streams and devices one running count
    per value. Busy time (a union) is not a sum: see _pure_cover.
    """
    spans = index.subtrees()
    pos = gather_by_key(spans["range_id"], spans["first"], deepest["range_id"]).alias("pos")
    rows = deepest.select("op_id", "range_id", "api_start").with_columns(pos).filter(pl.col("pos").is_not_null())
    del pos
    if rows.height == 0:
        return pl.DataFrame(schema=METRICS_SCHEMA)
    if not rows["pos"].is_sorted():  # ops launched in range order come sorted already
        rows = rows.sort("pos")
    at = rows["op_id"]
    rows = rows.hstack([facts[c].gather(at) for c in facts.columns])
    busy, mixed = _pure_cover(rows["start"], rows["end"], rows["pos"])
    lo, hi, ids = _slices(spans, rows["pos"], order)
    del spans  # each step below frees what it no longer needs: the peak holds the rows and the answer
    # ops whose overlapping neighbours sit in other deepest ranges: their union per range from pairs
    mixed_ops = rows.filter(mixed).select("op_id", "range_id") if mixed.any() else None
    rows = rows.drop("op_id", "range_id", "pos").with_columns(busy.alias("_busy"))
    del at, busy, mixed
    count = (hi - lo).alias("op_records")
    out = {"range_id": ids, "op_records": count}
    out |= {c.name: c for c in _slice_sums(rows, lo, hi, count).get_columns()}
    rows = rows.drop("_busy", "is_kernel", "first_of_launch", "role")
    for column, name, largest in (("start", "gpu_start_ns", False), ("end", "gpu_end_ns", True),
                                  ("api_start", "_first_api", False)):  # fmt: skip
        out[name] = _slice_extreme(rows[column], lo, hi, largest=largest).alias(name)
    out["streams"] = _distinct_in_slices(rows["stream"], lo, hi).alias("streams")
    out["devices"] = _distinct_in_slices(rows["device_id"], lo, hi).alias("devices")
    del rows
    if mixed_ops is not None:
        pairs = index.ancestors(mixed_ops, "op_id")
        pairs = pairs.hstack([facts[c].gather(pairs["op_id"]) for c in ("start", "end")])
        extra = union_length(pairs, "range_id")
        out["busy_ns"] = (out["busy_ns"] + gather_by_key(extra["range_id"], extra["busy_ns"], ids).fill_null(0)).alias(
            "busy_ns"
        )
    out["gpu_span_ns"] = (out["gpu_end_ns"] - out["gpu_start_ns"]).alias("gpu_span_ns")
    out["launch_latency_ns"] = (out["gpu_start_ns"] - out.pop("_first_api")).alias("launch_latency_ns")
    out["gap_ns"] = (out["gpu_span_ns"] - out["busy_ns"]).alias("gap_ns")
    return pl.DataFrame([out[c] for c in METRICS_SCHEMA]).cast(METRICS_SCHEMA)  # type: ignore[arg-type]


def _slices(spans: pl.DataFrame, pos: pl.Series, order: pl.Series) -> tuple[pl.Series, pl.Series, pl.Series]:
    """(lo, hi, range_id) of every range in *order* whose subtree holds ops: its ops are rows [lo, hi).

    *pos*: each op's deepest range's preorder number, sorted (the rows of subtree_metrics).
    """
    # ops sorted by pos: the first op of each preorder number, and of the next one for a number without ops
    runs = pos.rle().struct.unnest()
    first_op = pl.repeat(None, spans.height + 1, dtype=pl.Int64, eager=True)
    length = runs["len"].cast(pl.Int64)
    first_op.scatter(runs["value"], length.cum_sum() - length)
    first_op = first_op.scatter(spans.height, pos.len()).backward_fill()  # past the last number: the end
    ends = spans.select(
        "range_id", first_op.gather(spans["first"]).alias("lo"), first_op.gather(spans["stop"]).alias("hi")
    )
    ends = order.to_frame("range_id").hstack(rows_at(ends, "range_id", order).get_columns())  # two columns moved
    ends = ends.filter(pl.col("hi") > pl.col("lo"))
    return ends["lo"], ends["hi"], ends["range_id"]


def _slice_sums(rows: pl.DataFrame, lo: pl.Series, hi: pl.Series, count: pl.Series) -> pl.DataFrame:
    """gpu_ops, kernels, kernel/gpu/busy/role sums over each slice ``rows[lo:hi]`` (hi > lo).

    A sum is a difference of one running sum at the slice's ends; what :class:`SumPlan` derives
    takes none.
    """
    dur = pl.col("end") - pl.col("start")
    plan = SumPlan.of(rows)
    wanted: dict[str, pl.Expr] = {"gpu_sum_ns": dur, "busy_ns": pl.col("_busy"), **plan.summed(dur)}
    last, sums = hi - 1, {}
    for k, e in wanted.items():  # one running sum at a time: the peak holds one, not a dozen
        value = rows.select(e.cast(pl.Int64)).to_series()
        running = value.cum_sum()
        sums[k] = running.gather(last) - running.gather(lo) + value.gather(lo)
    sums |= plan.derived(count, sums["gpu_sum_ns"])
    order = ("gpu_ops", "kernels", "kernel_sum_ns", "gpu_sum_ns", "busy_ns", *ROLE_COLUMNS)
    return pl.DataFrame([sums[k].alias(k) for k in order])


def _slice_extreme(values: pl.Series, lo: pl.Series, hi: pl.Series, *, largest: bool) -> pl.Series:
    """The min (or max) of ``values[lo:hi]`` per slice (hi > lo).

    Where a slice's values never decrease, it is the first (last) value: ops usually run in launch order,
    which is range order. A running count of decreases tells those slices apart (none decreases in the
    slice: equal counts at its ends); only the others take the sparse table.
    """
    pick = hi - 1 if largest else lo
    if values.null_count():  # min/max skip nulls, the first value may be one: the sparse table for all
        return _slice_extremes({"v": (values, largest)}, lo, hi)["v"]
    if values.is_sorted():
        return values.gather(pick)
    drops = (values < values.shift(1)).fill_null(False).cast(pl.Int64).cum_sum()
    mixed = drops.gather(hi - 1) != drops.gather(lo)
    out = values.gather(pick)
    if not mixed.any():
        return out
    at = mixed.arg_true()  # ascending: scatter needs sorted indices before polars 1.3x
    return out.scatter(at, _slice_extremes({"v": (values, largest)}, lo.gather(at), hi.gather(at))["v"])


def _pure_cover(start: pl.Series, end: pl.Series, pos: pl.Series) -> tuple[pl.Series, pl.Series]:
    """Per op: what it adds to the busy time of the ranges holding it, and whether it is *mixed*.

    Ops sorted by start fall into clusters (an op joins the cluster before it
    when it starts before the furthest end so far); clusters' unions do not
    overlap, and a cluster's union is what its ops add, in start order, past
    the furthest end. A cluster whose ops share one deepest range (*pos*) lies
    in exactly the ranges holding that one, so its union is a per-op sum like
    any other. A cluster spread over several deepest ranges lies partly in
    some ranges: its ops are mixed (added 0 here) and counted from (op, range)
    pairs instead.
    """
    # ops usually come in start order already (one stream, launch order); ties in any order give the
    # same sums: a cluster is mixed or not whatever the order, and a pure one adds its union either way
    order = None if start.is_sorted() else start.arg_sort()
    prior = pl.col("end").cum_max().shift(1)
    new = prior.is_null() | (pl.col("start") >= prior)
    spread = (~pl.col("_new") & (pl.col("pos") != pl.col("pos").shift(1))).cast(pl.Int64).cum_sum()
    last = pl.col("_new").shift(-1, fill_value=True)
    mixed = pl.when(last).then("_spread").backward_fill() != pl.when("_new").then("_spread").forward_fill()
    swept = (
        pl.DataFrame(
            [start, end, pos] if order is None else [start.gather(order), end.gather(order), pos.gather(order)]
        )
        .with_columns(
            new.alias("_new"), (pl.col("end") - pl.max_horizontal("start", prior)).clip(lower_bound=0).alias("_cover")
        )
        .with_columns(spread.alias("_spread"))
        .select(mixed.alias("_mixed"), "_cover")
    )
    cover = swept["_cover"].set(swept["_mixed"], 0)
    if order is None:
        return cover, swept["_mixed"]
    back = order.arg_sort()  # the inverse permutation: a gather, as scatter needs sorted indices before polars 1.3x
    return cover.gather(back), swept["_mixed"].gather(back)


def _slice_extremes(columns: dict[str, tuple[pl.Series, bool]], lo: pl.Series, hi: pl.Series) -> dict[str, pl.Series]:
    """Per output name, the min (or, when its flag is set, the max) of ``values[lo:hi]`` per slice (hi > lo).

    A sparse table built one power of two at a time (level j: the extreme of
    the 2**j values from each position, by two zero-copy slices of level
    j - 1), keeping one level: a slice of length n, 2**j <= n < 2**(j+1), is
    the extreme of two overlapping level-j blocks.
    """
    level = (63 - (hi - lo).bitwise_leading_zeros()).cast(pl.Int64)
    order = level.arg_sort()
    bounds = level.gather(order).search_sorted(pl.int_range(0, int(level.max()) + 2, eager=True), side="left")
    tables = {name: values for name, (values, _) in columns.items()}
    out = {name: pl.repeat(None, lo.len(), dtype=values.dtype, eager=True) for name, (values, _) in columns.items()}
    for j in range(bounds.len() - 1):
        if j:
            d = 1 << (j - 1)
            for name, (_, largest) in columns.items():
                t, pick = tables[name], pl.max_horizontal if largest else pl.min_horizontal
                tables[name] = pl.select(pick(t.slice(0, t.len() - d), t.slice(d))).to_series()
        sel = order.slice(bounds[j], bounds[j + 1] - bounds[j]).sort()  # scatter wants sorted indices (polars < 1.3x)
        if sel.len():
            a, b = lo.gather(sel), hi.gather(sel) - (1 << j)
            for name, (_, largest) in columns.items():
                t, pick = tables[name], pl.max_horizontal if largest else pl.min_horizontal
                out[name].scatter(sel, pl.select(pick(t.gather(a), t.gather(b))).to_series())
    return {name: series.alias(name) for name, series in out.items()}


def _distinct_in_slices(values: pl.Series, lo: pl.Series, hi: pl.Series) -> pl.Series:
    """Distinct values in ``values[lo:hi]`` per slice (hi > lo): one running count per distinct value."""
    distinct = values.unique().to_list()
    if len(distinct) == 1:  # one stream, one device: every slice holds it
        return pl.ones(lo.len(), dtype=pl.Int64, eager=True)
    count = pl.zeros(lo.len(), dtype=pl.Int64, eager=True)
    for value in distinct:
        seen = values.eq_missing(value).cast(pl.Int64).cum_sum()
        seen = pl.concat([pl.Series([0], dtype=pl.Int64), seen])
        count = count + ((seen.gather(hi) - seen.gather(lo)) > 0).cast(pl.Int64)
    return count
