"""Attribute GPU operations to NVTX ranges (pure polars; no torch, no I/O).

nsys's rule: a GPU op belongs to a range when the CUDA API call that
launched it lies inside the range on the same thread. In ``nsys`` mode every
enclosing range gets the op (nested ranges overlap, as in ``nsys stats -r
nvtx_gpu_proj_trace``); in ``innermost`` mode each op counts once, in the
deepest enclosing range. Ops launched outside every range form the
``[unattributed]`` bucket; ops whose launch call is not in the trace (a
sliced capture) form ``[no launch record]``, which nsys silently omits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal, get_args

import polars as pl

from traceattr.attribution.intervals import _MAX_KEY, RangeIndex, union_length
from traceattr.attribution.roles import ROLES, RoleEnum, RoleRules
from traceattr.core.keys import first_of_id, gather_by_key, rows_at, scatter_rows
from traceattr.trace import schema as S
from traceattr.trace.loader import Trace, TraceMeta

Mode = Literal["nsys", "innermost"]
MODES: tuple[str, ...] = get_args(Mode)
UNATTRIBUTED = "[unattributed]"
NO_LAUNCH = "[no launch record]"
_UNATTRIBUTED_ID = -1  # group keys of the two buckets while aggregating
_NO_LAUNCH_ID = -2
# nsys mode on laminar threads: projections as subtree aggregates, no op × range pairs (tests turn it
# off to hold it to the pair path). Streams and devices are counted with one running count per distinct
# value, so a trace with more distinct values than this takes the pair path.
_SUBTREES = True
_MAX_DISTINCT = 64

ROLE_COLUMNS = tuple(f"{r}_sum_ns" for r in ROLES)  # op time summed per role: overlaps count twice
RANGE_COLUMNS = (
    "name", "domain", "message", "style", "pid", "tid", "range_id", "parent_id", "level", "num_child",
    "start_ns", "end_ns", "duration_ns", "closed",
    "gpu_start_ns", "gpu_end_ns", "gpu_span_ns", "gpu_ops", "op_records", "kernels",
    "kernel_sum_ns", "gpu_sum_ns", "busy_ns", "gap_ns", "launch_latency_ns", *ROLE_COLUMNS,
    "streams", "devices", "payload",
)  # fmt: skip
OP_COLUMNS = (
    "op_id", "kind", "role", "family", "name", "short_name", "start_ns", "end_ns", "duration_ns",
    "device_id", "context_id", "stream_id", "pid", "tid", "correlation_id", "api_start_ns",
    "range_id", "range_name", "outer_range_id", "outer_range_name",
    "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread",
    "static_smem", "dynamic_smem", "bytes", "graph_node_id", "graph_id", "mangled_name",
)  # fmt: skip


@dataclass(frozen=True)
class RangeFilter:
    """Which ranges take part: by domain name and/or a regex on the full name."""

    domain: str | None = None
    match: str | None = None

    def apply(self, ranges: pl.DataFrame) -> pl.DataFrame:
        if self.domain is not None:
            ranges = ranges.filter(pl.col("domain") == self.domain)
        if self.match is not None:
            ranges = ranges.filter(pl.col("name").str.contains(self.match).fill_null(False))
        return ranges

    @property
    def active(self) -> bool:
        return self.domain is not None or self.match is not None


@dataclass(frozen=True)
class Attribution:
    """The answer: one row per range (plus the buckets) and one row per GPU op.

    ``placement`` is the lean per-op result (role, innermost range, launch);
    ``ops`` joins it with the trace into the wide per-op table, lazily
    (``ops_lazy()``) so a writer can stream it instead of holding it whole.
    """

    ranges: pl.DataFrame
    placement: pl.DataFrame
    mode: str
    notes: tuple[str, ...]
    trace: Trace = field(repr=False)
    names: pl.DataFrame = field(repr=False)
    select: RangeFilter = field(default_factory=lambda: RangeFilter())

    @property
    def selected(self) -> bool:
        """Whether a domain or name filter chose the ranges."""
        return self.select.active

    @property
    def meta(self) -> TraceMeta:
        return self.trace.meta

    def ops_lazy(self) -> pl.LazyFrame:
        # Every per-op frame is in op_id order with op_id == row (load_trace,
        # _placement), so the wide table is built by positional gathers: no
        # hash join, and string columns are gathered as views into the small
        # name tables instead of copied per op.
        ops, placed = self.trace.gpu_ops, self.placement
        names = self.names.sort("name_key")
        key = placed["name_key"]
        named = self.ranges.filter(pl.col("range_id").is_not_null()).select("range_id", "name")
        wide = ops.hstack(
            [
                placed["role"],
                placed["family"],
                *(names[c].gather(key) for c in ("name", "short_name", "mangled_name")),
                placed["tid"],
                placed["api_start_ns"],
                placed["range_id"],
                gather_by_key(named["range_id"], named["name"], placed["range_id"]).alias("range_name"),
                placed["outer_range_id"],
                gather_by_key(named["range_id"], named["name"], placed["outer_range_id"]).alias("outer_range_name"),
            ]
        )
        return (
            wide.lazy()
            .with_columns(
                pl.col("start").alias("start_ns"),
                pl.col("end").alias("end_ns"),
                (pl.col("end") - pl.col("start")).alias("duration_ns"),
                S.pid_from_global("global_pid").cast(pl.Int32).alias("pid"),
            )
            .select(OP_COLUMNS)  # in op_id order: kernels, then memcpy, memset, graph rows, each by rowid
        )

    @cached_property
    def ops(self) -> pl.DataFrame:
        return self.ops_lazy().collect()


def attribute(
    trace: Trace,
    mode: Mode = "nsys",
    rules: RoleRules | None = None,
    select: RangeFilter | None = None,
) -> Attribution:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
    rules = rules or RoleRules.default()
    notes = list(trace.meta.notes)

    ranges, dropped = _usable_ranges(trace.ranges, select or RangeFilter())
    if dropped:
        notes.append(f"{dropped} start/end ranges ended on another thread: not projected (nsys drops them too)")
    index = RangeIndex(ranges)
    ranges = _with_tree(ranges, index)

    dedupe = trace.meta.duplicate_api_rows > 0
    launches = _launches(trace.gpu_ops, trace.api, repeated=dedupe)
    # a call logged twice can reach two chains of ranges: its ranges are no longer one subtree's ancestors
    subtree = mode == "nsys" and _SUBTREES and not dedupe and _few_distinct(trace.gpu_ops)
    every, deepest = _locate(index, launches, dedupe=dedupe, ancestors=mode == "nsys" and not subtree)
    keys, names = _name_keys(trace)
    roles_from = None
    if (select or RangeFilter()).active and any(r.range is not None for r in rules.rules):
        # a range rule (the L2 flush's) reads the op's innermost range of the whole trace, not of the
        # selection: a role belongs to the op, and --match must not turn the flush into a copy
        every_range, _ = _usable_ranges(trace.ranges, RangeFilter())
        full = RangeIndex(every_range)
        _, full_deepest = _locate(full, launches, dedupe=dedupe, ancestors=False)
        roles_from = (full_deepest, _with_tree(every_range, full))
        del full
    placement = _placement(keys, launches, deepest, ranges, names, rules, roles_from)
    del launches
    orphans = placement.filter(pl.col("api_start_ns").is_null()).height
    if orphans:
        notes.append(f"{orphans} GPU ops have no launch record in the trace (sliced capture): listed as {NO_LAUNCH}")

    facts = _op_facts(trace.gpu_ops, placement)
    # laminar threads from subtrees (in the range table's order); every holds only the other threads' pairs
    laminar = _subtree_metrics(index, deepest, facts, ranges["range_id"]) if subtree else None
    del index, deepest
    if mode == "nsys":
        assign = every
    else:
        assign = placement.filter(pl.col("range_id").is_not_null()).select(
            "op_id", "range_id", pl.col("api_start_ns").alias("api_start")
        )
    buckets = placement.filter(pl.col("range_id").is_null()).select(
        "op_id",
        pl.when(pl.col("api_start_ns").is_null())
        .then(pl.lit(_NO_LAUNCH_ID, pl.Int64))
        .otherwise(pl.lit(_UNATTRIBUTED_ID, pl.Int64))
        .alias("range_id"),
        pl.col("api_start_ns").alias("api_start"),
    )
    metrics = _metrics(pl.concat([assign, buckets]), facts)
    del assign, every, facts
    table = _range_table(ranges, metrics, laminar)
    return Attribution(table, placement, mode, tuple(notes), trace, names, select or RangeFilter())


def _with_tree(ranges: pl.DataFrame, index: RangeIndex) -> pl.DataFrame:
    """*ranges* with ``parent_id, level, root_id``: columns added, not every column copied through a join."""
    return ranges.hstack(rows_at(index.tree(), "range_id", ranges["range_id"]).get_columns())


def _usable_ranges(ranges: pl.DataFrame, select: RangeFilter) -> tuple[pl.DataFrame, int]:
    cross = pl.col("end_global_tid").is_not_null() & (pl.col("end_global_tid") != pl.col("global_tid"))
    dropped = ranges.filter(cross).height
    return select.apply(ranges.filter(~cross)), dropped


def _launches(gpu_ops: pl.DataFrame, api: pl.DataFrame, *, repeated: bool = True) -> pl.DataFrame:
    """(op_id, api_id, api start/end, thread) for every runtime row of an op's launch.

    correlationId is unique per process only, so the join is on (process,
    correlationId). Old exports log a call twice (two rows, one correlationId):
    both rows are kept and an op is inside a range if either row is (nsys).
    Without *repeated* rows, one process's ops find their row by key lookup.
    """
    calls = api.select(
        S.global_pid_from_tid("global_tid").alias("global_pid"),
        "correlation_id",
        "api_id",
        pl.col("start").alias("api_start"),
        pl.col("end").alias("api_end"),
        "global_tid",
    )
    keys = ["global_pid", "correlation_id"]
    op_pids = gpu_ops["global_pid"].unique()
    one_process = False
    if op_pids.null_count() == op_pids.len():
        keys = ["correlation_id"]  # no process recorded on the ops: ids alone
    elif op_pids.len() == 1 and calls["global_pid"].unique().equals(op_pids):
        keys, one_process = ["correlation_id"], True  # the same join on a single integer key
    if one_process and not repeated:  # ids unique in the process: a lookup, not a hash join
        found = rows_at(calls.drop("global_pid"), "correlation_id", gpu_ops["correlation_id"])
        return gpu_ops.select("op_id").hstack(found.get_columns()).filter(pl.col("api_id").is_not_null())
    return (
        gpu_ops.select("op_id", *keys)
        .join(calls.drop("global_pid") if "global_pid" not in keys else calls, on=keys, how="inner")
        .select("op_id", "api_id", "api_start", "api_end", "global_tid")
    )


def _locate(
    index: RangeIndex, launches: pl.DataFrame, *, dedupe: bool, ancestors: bool = True
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(op_id, range_id, api_start) for every holding range, and for the deepest one.

    An op launched by a call logged twice (old exports) can reach a range
    through either row; *dedupe* merges those, keeping the earlier call start.
    Without *ancestors* the first frame holds only the pairs of non-laminar
    threads (see :meth:`RangeIndex.locate`).
    """
    calls = launches.select(
        pl.col("api_id").alias("call_id"),
        "global_tid",
        pl.col("api_start").alias("start"),
        pl.col("api_end").alias("end"),
    )
    calls = calls.filter(first_of_id(calls["call_id"]))  # one row per call: its rows are alike
    every, deepest = index.locate(calls, ancestors=ancestors)
    out = []
    for located in (every, deepest):
        if located is deepest and not dedupe:  # one deepest range per call: a lookup by call
            found = rows_at(located, "call_id", launches["api_id"])
            pairs = launches.select("op_id", "api_start").hstack(found.get_columns())
            out.append(pairs.filter(pl.col("range_id").is_not_null()).select("op_id", "range_id", "api_start"))
            continue
        pairs = launches.select("op_id", pl.col("api_id").alias("call_id"), "api_start").join(
            located, on="call_id", how="inner"
        )
        if dedupe:
            pairs = pairs.group_by("op_id", "range_id").agg(pl.col("api_start").min())
        out.append(pairs.select("op_id", "range_id", "api_start"))
    return out[0], out[1]


def _name_keys(trace: Trace) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Give each distinct op identity a ``name_key`` and resolve its names once.

    Keys number the distinct identities in their sorted order (nulls last). Each identity column is
    replaced by its value's rank among the column's few distinct values, and the ranks are packed into
    one integer per op (mixed radix: packed order is the sorted order), so the distinct identities are
    the distinct integers: no hash of six columns over millions of ops, no join back to the ops.
    """
    gpu_ops = trace.gpu_ops
    levels, digits, radix = [], [], 1
    for col in _IDENT:
        values = gpu_ops[col]
        level = values.unique().drop_nulls().sort()  # a handful of names, kinds, graphs: a small hash
        nulls = values.null_count()
        if level.len() + (nulls > 0) > 1:  # else one rank for all (an unused column, one kind): digit 0
            # an Enum sorts in category order, which its physical codes follow: ranks from the codes
            ranks = level.to_physical().search_sorted(values.to_physical()).cast(pl.Int64)
            digits.append((ranks.set(values.is_null(), level.len()) if nulls else ranks) * radix)  # null: last
        levels.append((pl.concat([level, pl.Series([None], dtype=level.dtype)]), radix))
        radix *= level.len() + 1
        if radix >= 1 << 62:
            return _name_keys_joined(trace)
    packed = (
        pl.DataFrame(digits).select(pl.sum_horizontal(pl.all())).to_series()
        if digits
        else pl.zeros(gpu_ops.height, dtype=pl.Int64, eager=True)
    )
    distinct = packed.unique().sort()
    names = (
        pl.DataFrame(
            [
                level.gather((distinct // step) % level.len()).alias(col)
                for col, (level, step) in zip(_IDENT, levels, strict=True)
            ]
        )
        .with_row_index("name_key")
        .with_columns(pl.col("name_key").cast(pl.Int32))
    )
    keys = gpu_ops.select("op_id").hstack([distinct.search_sorted(packed).cast(pl.Int32).alias("name_key")])
    return keys, _resolve_names(names, trace.strings)


_IDENT = ("kind", "name_id", "short_name_id", "mangled_name_id", "copy_kind", "graph_id")


def _name_keys_joined(trace: Trace) -> tuple[pl.DataFrame, pl.DataFrame]:
    """_name_keys by a hash of the identity columns: for identities too varied to pack in one integer."""
    gpu_ops, ident = trace.gpu_ops, list(_IDENT)
    names = gpu_ops.select(ident).unique().sort(ident, nulls_last=True).with_row_index("name_key")
    names = names.with_columns(pl.col("name_key").cast(pl.Int32))
    keyed = gpu_ops.select("op_id", *ident).join(
        names.select("name_key", *ident), on=ident, how="left", nulls_equal=True, maintain_order="left"
    )
    return keyed.select("op_id", "name_key"), _resolve_names(names, trace.strings)


def _resolve_names(names: pl.DataFrame, strings: pl.DataFrame) -> pl.DataFrame:
    """(name_key, kind, name, short_name, mangled_name) of each identity: its StringIds values looked up."""
    names = names.hstack(
        [
            gather_by_key(strings["id"], strings["value"], names[col]).alias(out)
            for col, out in (("name_id", "name"), ("short_name_id", "short_name"), ("mangled_name_id", "mangled_name"))
        ]
    )
    labels = pl.DataFrame(
        {"copy_kind": list(S.MEMCPY_LABELS), "_label": list(S.MEMCPY_LABELS.values())},
        schema={"copy_kind": pl.Int32, "_label": pl.String},
    )
    names = names.join(labels, on="copy_kind", how="left").with_columns(
        pl.when(pl.col("kind") == "memcpy")
        .then(pl.lit("[CUDA memcpy ") + pl.col("_label").fill_null("Unknown") + pl.lit("]"))
        .when(pl.col("kind") == "memset")
        .then(pl.lit("[CUDA memset]"))
        .when(pl.col("kind") == "graph")
        .then(pl.lit("[CUDA graph ") + pl.col("graph_id").cast(pl.String).fill_null("?") + pl.lit("]"))
        .otherwise(pl.col("name"))
        .alias("name")
    )
    return names.select("name_key", "kind", "name", "short_name", "mangled_name")


def _innermost(deepest: pl.DataFrame, ranges: pl.DataFrame) -> pl.DataFrame:
    """(op_id, range_id, …, level, root_id): one innermost range per op."""
    inner = deepest.hstack(rows_at(ranges.select("range_id", "level", "root_id"), "range_id", deepest["range_id"]))
    if inner.height != inner["op_id"].n_unique():  # a call logged twice can reach two ranges
        inner = inner.sort("op_id", "level", "range_id", descending=[False, True, True]).unique("op_id", keep="first")
    return inner


def _placement(
    keys: pl.DataFrame,
    launches: pl.DataFrame,
    deepest: pl.DataFrame,
    ranges: pl.DataFrame,
    names: pl.DataFrame,
    rules: RoleRules,
    roles_from: tuple[pl.DataFrame, pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """Per op: role, family, innermost range and its root, launching thread and call start.

    *roles_from*: (deepest, ranges) of the whole trace when *ranges* is a selection: roles use those.
    """
    inner = _innermost(deepest, ranges)
    # The launch row shown per op: the innermost of duplicated runtime rows (latest start).
    launch = launches.select("op_id", "api_start", "global_tid")
    if launch.height != launch["op_id"].n_unique():
        launch = launch.sort("op_id", "api_start", descending=[False, True]).unique("op_id", keep="first")
    # keys is in op_id order with op_id == row: the other per-op frames are scattered to their rows
    n = keys.height
    placed = keys.hstack(
        [
            *scatter_rows(launch.select("op_id", pl.col("api_start").alias("api_start_ns"),
                                        S.tid_from_global("global_tid").cast(pl.Int32).alias("tid")), "op_id", n),
            *scatter_rows(inner.select("op_id", "range_id", pl.col("root_id").alias("outer_range_id")), "op_id", n),
        ]
    )  # fmt: skip
    if roles_from is None:
        classified = rules.classify(placed, names, ranges.select("range_id", pl.col("name").alias("range_name")))
    else:
        full_deepest, full_ranges = roles_from
        whole = placed.select("op_id", "name_key").hstack(
            scatter_rows(_innermost(full_deepest, full_ranges).select("op_id", "range_id"), "op_id", n)
        )
        roles = rules.classify(whole, names, full_ranges.select("range_id", pl.col("name").alias("range_name")))
        classified = placed.hstack(roles.select("role", "family"))
    return classified  # op_id order, one row per op: Attribution.ops_lazy gathers by position


def _op_facts(gpu_ops: pl.DataFrame, placement: pl.DataFrame) -> pl.DataFrame:
    """The few per-op values the range metrics need, in op_id order (row == op_id)."""
    # nsys's NumGPUOps counts launch calls (a graph launch of 5 kernels is 1);
    # correlation ids repeat across processes, so a launch is (process, id).
    # Every op of one launch reaches the same ranges (it joins the same runtime
    # rows), so a range's distinct launches are its ops that are their launch's first.
    pid = gpu_ops["global_pid"]
    if pid.null_count() == pid.len() or (pid.null_count() == 0 and pid.min() == pid.max()):  # one process
        first = first_of_id(gpu_ops["correlation_id"])
    else:
        first = gpu_ops.select(pl.struct("global_pid", "correlation_id").is_first_distinct()).to_series()
    return gpu_ops.select(
        "start",
        "end",
        (pl.col("kind") == "kernel").alias("is_kernel"),
        _STREAM.alias("stream"),
        "device_id",
    ).hstack([first.alias("first_of_launch"), placement["role"]])


def _metrics(assign: pl.DataFrame, facts: pl.DataFrame) -> pl.DataFrame:
    """Per range_id: projection, op counts, kernel/busy/gap time, latency, role sums.

    Segment reductions instead of a group-by: sorted by (range, x), each
    range's rows are one run at the same positions whatever x is, so a sum is
    a difference of running sums at the run ends and a min/max is a run's
    first/last row. Hundreds of thousands of tiny groups cost a hash group-by
    several times more than these sorts; the few polars calls matter too.
    """
    at = assign["op_id"]
    rows = assign.select("range_id", "api_start").hstack([facts[c].gather(at) for c in facts.columns])
    if rows.height == 0:
        return pl.DataFrame(schema=_METRICS_SCHEMA)
    new_run = pl.col("range_id").ne_missing(pl.col("range_id").shift(1))
    if not _in_order(rows, "start"):  # ops launched in range and start order (innermost mode) come sorted
        rows = rows.sort("range_id", "start")

    def by_range(col: str, **nulls: bool) -> pl.Expr:  # *col* sorted within each range, if it is not yet
        return pl.col(col) if _in_order(rows, col) else pl.col(col).sort_by("range_id", col, **nulls)

    def new_value(col: str) -> pl.Expr:  # first row of a run, or a value unlike the previous row's
        by = by_range(col)
        return (new_run | by.ne_missing(by.shift(1))).cast(pl.Int64)

    one = {col: facts[col].n_unique() == 1 for col in ("stream", "device_id")}  # one in the whole trace: 1 per range
    rows = rows.with_columns(
        by_range("end").alias("_end_by"),
        by_range("api_start", nulls_last=True).alias("_api_by"),
        *(new_value(col).alias(f"_new_{col}") for col in one if not one[col]),
        new_run.cast(pl.Int64).cum_sum().sub(1).alias("_run"),
        (pl.col("end") - pl.col("start")).alias("_dur"),
    )
    first = rows.select(new_run.arg_true())["range_id"]
    last = pl.concat([first.slice(1) - 1, pl.Series([rows.height - 1], dtype=first.dtype)])
    runs = rows.select(
        pl.col("range_id").gather(first),
        pl.col("start").gather(first).alias("gpu_start_ns"),
        pl.col("_end_by").gather(last).alias("gpu_end_ns"),
        pl.col("_api_by").gather(first).alias("_first_api"),
    )
    count = (last - first + 1).cast(pl.Int64)
    plan = _SumPlan.of(rows)
    dur = pl.col("_dur")
    sums = {"gpu_sum_ns": dur, "busy_ns": _covered(rows, runs), **plan.summed(dur)}
    sums |= {
        name: pl.col(f"_new_{col}") for name, col in (("streams", "stream"), ("devices", "device_id")) if not one[col]
    }
    ends = rows.select(e.cast(pl.Int64).cum_sum().alias(k) for k, e in sums.items())[last]
    totals = ends.select(pl.all() - pl.all().shift(1, fill_value=0))
    ones = pl.ones(count.len(), dtype=pl.Int64, eager=True)
    fixed = plan.derived(count, totals["gpu_sum_ns"])
    fixed |= {name: ones for name, col in (("streams", "stream"), ("devices", "device_id")) if one[col]}
    return (
        runs.hstack(totals)
        .hstack([series.alias(name) for name, series in fixed.items()])
        .with_columns(
            pl.Series("op_records", count),
            (pl.col("gpu_end_ns") - pl.col("gpu_start_ns")).alias("gpu_span_ns"),
            (pl.col("gpu_start_ns") - pl.col("_first_api")).alias("launch_latency_ns"),
        )
        .with_columns((pl.col("gpu_span_ns") - pl.col("busy_ns")).alias("gap_ns"))
        .select(list(_METRICS_SCHEMA))
    )


@dataclass(frozen=True)
class _SumPlan:
    """Which per-range sums need a running sum over the ops of *rows*.

    A flag set on every op sums to the range's op count, a role no op has to zero, and the only role
    present to gpu_sum_ns: most traces have one op per launch, only kernels and few roles.
    """

    every_launch: bool
    every_kernel: bool
    present: frozenset[str]

    @classmethod
    def of(cls, rows: pl.DataFrame) -> _SumPlan:
        present = frozenset(rows["role"].unique().drop_nulls().to_list())
        return cls(bool(rows["first_of_launch"].all()), bool(rows["is_kernel"].all()), present)

    def summed(self, dur: pl.Expr) -> dict[str, pl.Expr]:
        """The sums beyond gpu_sum_ns and busy_ns that need a running sum, as per-op values."""
        out: dict[str, pl.Expr] = {}
        if not self.every_launch:
            out["gpu_ops"] = pl.col("first_of_launch")
        if not self.every_kernel:
            out |= {"kernels": pl.col("is_kernel"), "kernel_sum_ns": dur * pl.col("is_kernel")}
        if len(self.present) > 1:
            out |= {f"{role}_sum_ns": dur * (pl.col("role") == role) for role in ROLES if role in self.present}
        return out

    def derived(self, count: pl.Series, gpu_sum: pl.Series) -> dict[str, pl.Series]:
        """The other sums, from each range's op count and gpu_sum_ns."""
        out: dict[str, pl.Series] = {}
        if self.every_launch:
            out["gpu_ops"] = count
        if self.every_kernel:
            out |= {"kernels": count, "kernel_sum_ns": gpu_sum}
        zero = pl.zeros(count.len(), dtype=pl.Int64, eager=True)
        for role in ROLES:
            if len(self.present) <= 1 or role not in self.present:
                out[f"{role}_sum_ns"] = gpu_sum if self.present == {role} else zero
        return out


def _in_order(rows: pl.DataFrame, col: str) -> bool:
    """*rows* sorted by (range_id, *col*) already, neither null: a check costs far less than a sort."""
    if rows["range_id"].null_count() or rows[col].null_count():
        return False
    rid, value = pl.col("range_id"), pl.col(col)
    step = (rid > rid.shift(1)) | ((rid == rid.shift(1)) & (value >= value.shift(1)))
    return bool(rows.select(step.fill_null(True).all()).item())  # the first row has no previous one


_METRICS_SCHEMA = {
    "range_id": pl.Int64, "gpu_start_ns": pl.Int64, "gpu_end_ns": pl.Int64, "gpu_ops": pl.Int64,
    "op_records": pl.Int64, "kernels": pl.Int64, "kernel_sum_ns": pl.Int64, "gpu_sum_ns": pl.Int64,
    "streams": pl.Int64, "devices": pl.Int64, "busy_ns": pl.Int64, **dict.fromkeys(ROLE_COLUMNS, pl.Int64),
    "gpu_span_ns": pl.Int64, "launch_latency_ns": pl.Int64, "gap_ns": pl.Int64,
}  # fmt: skip


_STREAM = pl.col("device_id").cast(pl.Int64) * (1 << 32) + pl.col("stream_id")  # one key per (device, stream)


def _few_distinct(gpu_ops: pl.DataFrame) -> bool:
    """Few enough streams and devices for _distinct_in_slices (one running count per value)."""
    counts = gpu_ops.select(_STREAM.n_unique().alias("streams"), pl.col("device_id").n_unique()).row(0)
    return max(counts) <= _MAX_DISTINCT


def _subtree_metrics(index: RangeIndex, deepest: pl.DataFrame, facts: pl.DataFrame, order: pl.Series) -> pl.DataFrame:
    """_metrics' columns for the laminar threads' ranges (nsys mode), without op × range pairs.

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
    if rows.height == 0:
        return pl.DataFrame(schema=_METRICS_SCHEMA)
    if not rows["pos"].is_sorted():  # ops launched in range order come sorted already
        rows = rows.sort("pos")
    at = rows["op_id"]
    rows = rows.hstack([facts[c].gather(at) for c in facts.columns])
    busy, mixed = _pure_cover(rows["start"], rows["end"], rows["pos"])
    # ops sorted by pos: the first op of each preorder number, and of the next one for a number without ops
    runs = rows["pos"].rle().struct.unnest()
    first_op = pl.repeat(None, spans.height + 1, dtype=pl.Int64, eager=True)
    length = runs["len"].cast(pl.Int64)
    first_op.scatter(runs["value"], length.cum_sum() - length)
    first_op = first_op.scatter(spans.height, rows.height).backward_fill()  # past the last number: the end
    ends = spans.select(
        "range_id", first_op.gather(spans["first"]).alias("lo"), first_op.gather(spans["stop"]).alias("hi")
    )
    ends = order.to_frame("range_id").hstack(rows_at(ends, "range_id", order).get_columns())  # two columns moved
    ends = ends.filter(pl.col("hi") > pl.col("lo"))
    lo, hi = ends["lo"], ends["hi"]
    count = (hi - lo).alias("op_records")
    out = ends.select("range_id").hstack(
        [
            count,
            *_slice_sums(rows.with_columns(busy.alias("_busy")), lo, hi, count).get_columns(),
            _slice_extreme(rows["start"], lo, hi, largest=False).alias("gpu_start_ns"),
            _slice_extreme(rows["end"], lo, hi, largest=True).alias("gpu_end_ns"),
            _slice_extreme(rows["api_start"], lo, hi, largest=False).alias("_first_api"),
            _distinct_in_slices(rows["stream"], lo, hi).alias("streams"),
            _distinct_in_slices(rows["device_id"], lo, hi).alias("devices"),
        ]
    )
    # ops whose overlapping neighbours sit in other deepest ranges: their union per range from pairs
    if mixed.any():
        pairs = index.ancestors(rows.filter(mixed).select("op_id", "range_id"), "op_id")
        pairs = pairs.hstack([facts[c].gather(pairs["op_id"]) for c in ("start", "end")])
        extra = union_length(pairs, "range_id")
        out = out.with_columns(
            pl.col("busy_ns") + gather_by_key(extra["range_id"], extra["busy_ns"], out["range_id"]).fill_null(0)
        )
    return (
        out.with_columns(
            (pl.col("gpu_end_ns") - pl.col("gpu_start_ns")).alias("gpu_span_ns"),
            (pl.col("gpu_start_ns") - pl.col("_first_api")).alias("launch_latency_ns"),
        )
        .with_columns((pl.col("gpu_span_ns") - pl.col("busy_ns")).alias("gap_ns"))
        .select(list(_METRICS_SCHEMA))
        .cast(_METRICS_SCHEMA)  # type: ignore[arg-type]
    )


def _slice_sums(rows: pl.DataFrame, lo: pl.Series, hi: pl.Series, count: pl.Series) -> pl.DataFrame:
    """gpu_ops, kernels, kernel/gpu/busy/role sums over each slice ``rows[lo:hi]`` (hi > lo).

    A sum is a difference of one running sum at the slice's ends; what :class:`_SumPlan` derives
    takes none.
    """
    dur = pl.col("end") - pl.col("start")
    plan = _SumPlan.of(rows)
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
    bounds = level.gather(order).search_sorted(pl.int_range(0, int(level.max()) + 2, eager=True), side="left")  # type: ignore[arg-type]
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


def _covered(rows: pl.DataFrame, runs: pl.DataFrame) -> pl.Expr:
    """Per row of *rows* (sorted by range, start): the time it adds to its range's union.

    An interval adds only what reaches past the furthest end seen before it in
    its range. Runs are laid end to end on one axis (each shifted to begin
    where the previous one ended), so one running maximum serves them all.
    """
    extent = runs["gpu_end_ns"] - runs["gpu_start_ns"] + 1
    start, end = pl.col("start"), pl.col("end")
    if int(extent.sum()) < _MAX_KEY:
        shift = pl.lit(extent.cum_sum() - extent - runs["gpu_start_ns"]).gather(pl.col("_run"))
        start, end = start + shift, end + shift
        prior = end.cum_max().shift(1)
    else:  # too wide for one axis: a running maximum per range (slower, same answer)
        prior = end.cum_max().shift(1).over("_run")
    return (end - pl.max_horizontal(start, prior)).clip(lower_bound=0)


def _range_table(ranges: pl.DataFrame, metrics: pl.DataFrame, laminar: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per range in NVTX row order, then the buckets; every column of RANGE_COLUMNS.

    *metrics*: per range with ops (range_id >= 0) and per bucket; *laminar*: more ranges' metrics.
    """
    projected = metrics.filter(pl.col("range_id") >= 0)
    if laminar is not None:  # usually all of them, in the table's order: kept as they are, not copied
        projected = laminar if projected.height == 0 else pl.concat([laminar, projected])
    per_range = rows_at(projected, "range_id", ranges["range_id"])
    # nsys's NumChild counts children that have GPU ops themselves (a metrics row: at least one op)
    children = (
        ranges.select("parent_id")
        .filter(pl.col("parent_id").is_not_null() & per_range["op_records"].is_not_null())
        .group_by("parent_id")
        .agg(pl.len().cast(pl.Int64).alias("num_child"))
    )
    zero_when_empty = ["gpu_ops", "op_records", "kernels", "num_child", "streams", "devices",
                       "kernel_sum_ns", "gpu_sum_ns", "busy_ns", *ROLE_COLUMNS]  # fmt: skip
    named = (
        ranges.select(
            "name",
            "domain",
            "message",
            pl.col("style").cast(pl.String),
            "pid",
            "tid",
            "range_id",
            "parent_id",
            "level",
            pl.col("start").alias("start_ns"),
            pl.col("end").alias("end_ns"),
            (pl.col("end") - pl.col("start")).alias("duration_ns"),
            "closed",
            "payload",
        )
        .hstack(rows_at(children, "parent_id", ranges["range_id"]).get_columns())
        .hstack(per_range.get_columns())
        .with_columns([pl.col(c).fill_null(0) for c in zero_when_empty])
        .select(RANGE_COLUMNS)
    )
    buckets = (
        metrics.filter(pl.col("range_id") < 0)
        .sort("range_id", descending=True)  # [unattributed], then [no launch record]
        .with_columns(
            pl.when(pl.col("range_id") == _NO_LAUNCH_ID)
            .then(pl.lit(NO_LAUNCH))
            .otherwise(pl.lit(UNATTRIBUTED))
            .alias("name"),
            pl.lit(None, pl.Int64).alias("range_id"),
            pl.lit(0, pl.Int64).alias("num_child"),
        )
    )
    missing = [pl.lit(None, named.schema[c]).alias(c) for c in RANGE_COLUMNS if c not in buckets.columns]
    return pl.concat([named, buckets.with_columns(missing).select(RANGE_COLUMNS).cast(named.schema)])


__all__ = [
    "MODES", "NO_LAUNCH", "OP_COLUMNS", "RANGE_COLUMNS", "ROLE_COLUMNS", "UNATTRIBUTED",
    "Attribution", "Mode", "RangeFilter", "RoleEnum", "attribute",
]  # fmt: skip
