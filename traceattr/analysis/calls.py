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

from collections.abc import Sequence
from dataclasses import dataclass, replace

import polars as pl

from traceattr.attribution.calltime import (
    BASIS_COLUMNS,
    EXPOSED_COLUMNS,
    QUEUE_COLUMNS,
    event_records,
    op_times,
    owners,
    record_calls,
    stream_free_at,
    subtrees,
    with_queue_times,
)
from traceattr.attribution.engine import (
    ROLE_COLUMNS,
    Attributing,
    Attribution,
    Mode,
    RangeFilter,
    WindowRows,
    attribute,
)
from traceattr.attribution.roles import RoleRules
from traceattr.core.callnames import (
    AUTO,
    BETWEEN,
    FLUSH,
    HOLD,
    LEAD,
    WARMUP,
    checked_group,
    group_fields,
    has_shape_runs,
    series_and_iteration,
    shape_runs,
    without_counters,
)  # fmt: skip
from traceattr.core.errors import TraceattrError
from traceattr.core.keys import rows_at
from traceattr.core.shapes import ShapeError, parse_shape
from traceattr.trace.loader import RowIds, Trace, load_rows, load_trace

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
    finder = CallFinder(att.trace, group, nested=att.mode == "nsys")
    tree = att.trace.ranges.join(att.call_tree, on="range_id", how="left")  # a selection's own tree, when chosen
    part = finder.window(WindowRows(att.ranges, tree, att.placement, None))
    return finder.table([part], att.meta.path, selected=att.selected)


def reduced_calls(
    trace: Trace,
    mode: Mode = "nsys",
    rules: RoleRules | None = None,
    select: RangeFilter | None = None,
    group: str | None = None,
    *,
    keep: Sequence[str] = (),
    ops: bool = False,
    threads: int | None = None,
) -> tuple[Attribution, pl.DataFrame]:
    """The attribution of *trace* and its calls (:func:`calls`), the range table reduced to its calls window by
    window as it is made, on the windows' threads: what is held is the calls, not the whole range table (sweep:
    281 MB).

    The :class:`Attribution` keeps the range table's *keep* columns only (range_id among them) and only the rows of
    the ranges in its calls' subtrees, and lets the trace's CUDA API rows go once the launches are found; with *ops*
    it keeps the per-op placement and the trace's GPU ops: what a timeline of chosen calls draws (their ranges, and
    their ops' rows, :meth:`Attribution.ops_at`). Else those go too, and it says what describes the trace (meta,
    notes, devices). Pass the trace itself (``reduced_calls(load_trace(path))``), not one held elsewhere,
    or its frames stay held. A selection (*select*) changes what a call owns after every window is attributed:
    then the whole attribution is made, kept, and read as :func:`calls` reads it. *threads*: windows attributed side
    by side (:meth:`Attributing.reduced`)."""
    select = select or RangeFilter()
    if select.active:
        att = attribute(trace, mode, rules, select)
        return att, calls(att, group)
    held = [trace]
    del trace  # this frame would hold it through the windows
    att, table, _ = _reduced(held, mode, rules, group, keep=keep, ops=ops, spans=False, threads=threads)
    return att, table


def calls_to_read_again(
    trace: Trace, rows: RowIds, mode: Mode = "nsys", rules: RoleRules | None = None, group: str | None = None
) -> tuple[Attribution, pl.DataFrame, CallsAgain]:
    """:func:`reduced_calls` of *trace* (no selection), holding neither ranges nor ops: instead, per call, the GPU
    ops a timeline of it draws and where its ranges, ops and launch rows lie in the export (*rows*), so that the
    calls a timeline draws, chosen once every call is known, are read again and attributed alone
    (:meth:`CallsAgain.attribution`). The trace handed over is let go as its windows are attributed."""
    held = [trace]
    del trace  # this frame would hold it through the windows
    att, table, spans = _reduced(held, mode, rules, group, keep=(), ops=False, spans=True)
    return att, table, CallsAgain(spans, rows, mode, rules)


def _reduced(
    held: list[Trace], mode: Mode, rules: RoleRules | None, group: str | None, *, keep: Sequence[str], ops: bool,
    spans: bool, threads: int | None = None,
) -> tuple[Attribution, pl.DataFrame, pl.DataFrame]:  # fmt: skip
    """reduced_calls without a selection, and with *spans* each call's :func:`_call_spans` (else an empty frame).
    *held*: the trace alone in a list, emptied here, so that no frame of this call holds it through the windows."""
    trace = held.pop()
    finder = CallFinder(trace, group, nested=mode == "nsys", members=bool(keep), spans=spans)
    run = Attributing(trace, mode, rules, RangeFilter(), keep_calls=False, keep_placement=ops)
    del trace  # the attribution holds what it needs of it (and lets the API rows go)

    def reduce(w: WindowRows) -> tuple[CallPart, pl.DataFrame]:
        part = finder.window(w)
        if not keep:
            return part, pl.DataFrame()
        return part, w.rows.filter(pl.col("range_id").is_in(part.members.implode())).select(keep)

    parts = list(run.reduced(reduce, threads))
    finder.done()
    att = run.result(pl.concat([ranges for _, ranges in parts]))
    del run
    # what the calls and the kept columns say of the NVTX ranges and strings, the trace says no more
    t = att.trace
    trace = replace(t, ranges=t.ranges.clear(), marks=t.marks.clear(), strings=t.strings.clear())
    del t
    if ops:
        att = replace(att, trace=trace)
    else:
        att = replace(
            att,
            placement=att.placement.clear(),
            names=att.names.clear(),
            trace=replace(trace, gpu_ops=trace.gpu_ops.clear()),
        )
    found = [part for part, _ in parts]
    del parts
    table = finder.table(found, att.meta.path, selected=False)
    return att, table, pl.concat([p.spans for p in found]) if spans else _NO_SPANS


@dataclass(frozen=True)
class _Try:
    """One way of reading a call's name: a grouping regex on the message (or, for a ``--group`` that reads no
    message, on the name nsys shows), keeping the shape label as written or not."""

    pattern: str
    column: str  # "_text" (the message, else the name) or "name"
    keep_shape: bool


def _tries(group: str | None) -> tuple[_Try, ...]:
    """The ways tried in order: the presets of AUTO, or *group* on the message, then on ``domain:message``."""
    if group is None:
        return tuple(_Try(checked_group(p), "_text", p == "traceattr") for p in AUTO)
    pattern = checked_group(group)
    return _Try(pattern, "_text", group == "traceattr"), _Try(pattern, "name", False)


# what a call keeps of its range's row (the metrics beside its name)
_RANGE_PART = ("range_id", "name", "gpu_start_ns", "gpu_span_ns", "busy_ns", "gap_ns", "kernel_sum_ns", "gpu_sum_ns",
               "launch_latency_ns", "kernels", "gpu_ops", *ROLE_COLUMNS)  # fmt: skip


@dataclass(frozen=True)
class CallPart:
    """What one window of the range table gives the call table: its ranges read as calls by the window's first
    way (``way``: its index) that reads any, the top-level ranges (the calls when no way reads any range of the
    trace), both as call-table rows, and the counts that explain an empty table."""

    named: pl.DataFrame
    way: int | None
    top: pl.DataFrame
    worked: int  # ranges with GPU work
    unclosed: int  # of those, never closed
    usable: int  # closed, with GPU time: the ranges that can be calls
    example: pl.DataFrame  # the usable range with the most ops (name, message, gpu_ops), or none
    members: pl.Series  # with CallFinder(members=True): the range ids of these calls' subtrees
    spans: pl.DataFrame  # with CallFinder(spans=True): per call, _call_spans


class CallFinder:
    """The calls of one attribution, found a window of its range table at a time (:meth:`window`, thread-safe:
    windows run side by side) and put together once every window is read (:meth:`table`).

    Which way of reading names is used is the first that reads any range of the whole trace; a window keeps
    the calls of its own first way, which is that one wherever it reads any (no earlier way read anything
    anywhere). Only while no window has read a name are the top-level ranges kept too (the fallback).
    Each window's calls are finished there (CALL_COLUMNS, a column of one value kept once), so the table is
    their concatenation: a column added to a million-row frame of many parts copies every column."""

    def __init__(self, trace: Trace, group: str | None, *, nested: bool, members: bool = False,
                 spans: bool = False) -> None:  # fmt: skip
        """*members*: name the ranges of each window's calls' subtrees (CallPart.members), for a caller that keeps
        some of the range table for them only; *spans*: each call's :func:`_call_spans` (CallPart.spans)."""
        self.tries, self.group, self.nested, self.members = _tries(group), group, nested, members
        self.spans = spans
        # per op: what a call's own columns read; op_id == row
        self.ops = trace.gpu_ops.select("start", "end", stream_free_at(trace.gpu_ops).alias("stream_free_ns"))
        self.records = record_calls(trace.api, trace.strings)
        self._named = False  # a window read a call by name: no top-level fallback is needed
        self._short: dict[str, str] = {}  # shape label -> its short name, parsed once for every window

    def done(self) -> None:
        """Every window is read: the per-op columns go."""
        self.ops = self.ops.clear()

    def window(self, w: WindowRows) -> CallPart:
        rows = w.rows
        worked = rows.filter(pl.col("range_id").is_not_null() & (pl.col("gpu_ops") > 0))
        usable = (
            worked.filter(pl.col("closed") & (pl.col("gpu_sum_ns") > 0))
            .select(*_RANGE_PART, "message", "level")
            # a range without text is still a call, shown by this label
            .with_columns(pl.col("name").fill_null(UNNAMED))
            .with_columns(pl.coalesce("message", "name").alias("_text"))
        )
        named, way = _read(usable.head(0), self.tries[0].pattern, "_text"), None
        for i, attempt in enumerate(self.tries):
            picked = _read(usable, attempt.pattern, attempt.column)
            if picked.height:
                named, way, self._named = picked, i, True
                break
        top = usable.head(0) if self.group is not None or self._named else _top(usable)
        ids = pl.concat([named["range_id"], top["range_id"]]).unique()
        ops = self.ops if w.op_ids is None else self.ops[w.op_ids]
        owner = owners(w.ranges, ids, nested=self.nested)
        # the ranges a timeline of these calls draws: their own and every range nested in them, in either mode
        members = pl.Series("range_id", [], pl.Int64)
        if self.members:
            members = (owner if self.nested else subtrees(w.ranges, ids))["range_id"]
        spans = _call_spans(owner if self.nested else subtrees(w.ranges, ids), w) if self.spans else _NO_SPANS
        times = op_times(owner, w.placement, ops).join(
            event_records(pl.DataFrame({"call_id": ids}), w.ranges, self.records), on="call_id", how="left"
        )

        def timed(calls: pl.DataFrame) -> pl.DataFrame:
            own = calls.with_columns(pl.col("range_id").alias("call_id"))
            return own.join(times, on="call_id", how="left", maintain_order="left")

        keep_shape = self.tries[way or 0].keep_shape
        return CallPart(
            _finished(self._named_calls(timed(named.drop("message", "level", "_text")), keep_shape=keep_shape)),
            way,
            _finished(_series(timed(top.drop("_text")))),
            worked.height,
            int((~worked["closed"]).sum()),
            usable.height,
            _most_ops(usable.select("name", "message", "gpu_ops")),
            members,
            spans,
        )

    def _named_calls(self, picked: pl.DataFrame, *, keep_shape: bool) -> pl.DataFrame:
        """*picked* (:func:`_read`) with its shapes in their short form (unless kept as written) and its series."""
        if not keep_shape:
            for label in picked["shape"].unique().drop_nulls().to_list():
                if label not in self._short:
                    self._short[label] = _short_shape(label)
            picked = picked.with_columns(pl.col("shape").replace(self._short))
        return picked.with_columns(pl.format("{} {}", "backend", "shape").alias("series"))

    def table(self, parts: Sequence[CallPart], path: object, *, selected: bool) -> pl.DataFrame:
        """The call table (CALL_COLUMNS, in time order) from every window's part, in the windows' order."""
        worked, unclosed = sum(p.worked for p in parts), sum(p.unclosed for p in parts)
        if sum(p.usable for p in parts) == 0 and worked:
            # a range that never closed has no duration of its own (it ends where the trace does): no call, as in
            # nsys; nor one whose ops all last 0 ns (zero-length kernels, noted at load): it measured no time
            why = {0: "lasts 0 ns (its GPU ops all do)", worked: "never closed (no end time; nsys projects none)"}
            raise TraceattrError(
                f"{path}: every NVTX range with GPU work ({worked:,}) "
                f"{why.get(unclosed, 'never closed or lasts 0 ns')}: no call has a duration"
            )
        ways = [p.way for p in parts if p.way is not None]
        if ways:
            table = pl.concat([p.named for p in parts if p.way == min(ways)], rechunk=False)
        elif self.group is not None:
            examples = pl.concat([p.example for p in parts])
            raise TraceattrError(
                f"{path}: --group {self.group!r} read no range with GPU work as backend + shape, neither its "
                f"message nor its domain:message{_example_name(examples)}"
                + (" (the --domain/--match filter applies first)" if selected else "")
            )
        else:
            # parts with rows only: an empty part's columns are no one value, and would spread out the others
            table = pl.concat([p.top for p in parts if p.top.height] or [parts[0].top], rechunk=False)
        # the windows' parts as they are (no copy) where the calls come in time order already (ranges by start)
        return table if table["gpu_start_ns"].is_sorted() else table.sort("gpu_start_ns")


_SPAN_SCHEMA = pl.Schema(
    [("call_id", pl.Int64()), ("ops", pl.UInt32())]
    + [(c, pl.Int64()) for c in ("range_lo", "range_hi", "op_lo", "op_hi", "api_lo", "api_hi")]
)
_NO_SPANS = pl.DataFrame(schema=_SPAN_SCHEMA)


def _call_spans(tree: pl.DataFrame, w: WindowRows) -> pl.DataFrame:
    """Per call of *tree* (:func:`subtrees`: each call's range and every range nested in it, of window *w*): the
    GPU ops placed in those ranges (``ops``: the bars its timeline would draw) and the spans of ids (inclusive)
    that hold the ranges, those ops (op_id in the trace) and their launch rows (api_id). A call with a range
    that never closed has no ``range_lo``: its ranges end where the trace does, which a part read again cannot
    tell."""
    closed = w.ranges.select("range_id", "closed").join(tree, on="range_id")
    ranges = closed.group_by("call_id").agg(
        pl.when(pl.col("closed").all()).then(pl.col("range_id").min()).alias("range_lo"),
        pl.col("range_id").max().alias("range_hi"),
    )
    mine = w.placement.select("op_id", "range_id").join(tree, on="range_id")
    launch = pl.Series("api_id", [], pl.Int64)
    if w.launches is not None and w.launches.height:
        launch = rows_at(w.launches.select("op_id", "api_id"), "op_id", mine["op_id"]).to_series()
    trace_ops = mine["op_id"] if w.op_ids is None else w.op_ids.gather(mine["op_id"])
    ops = (
        pl.DataFrame([mine["call_id"], trace_ops.cast(pl.Int64).alias("op_id"), launch.alias("api_id")])
        if launch.len() == mine.height
        else mine.select("call_id", pl.lit(None, pl.Int64).alias("op_id"), pl.lit(None, pl.Int64).alias("api_id"))
    )
    per_call = ops.group_by("call_id").agg(
        pl.len().cast(pl.UInt32).alias("ops"),
        pl.col("op_id").min().alias("op_lo"),
        pl.col("op_id").max().alias("op_hi"),
        pl.col("api_id").min().alias("api_lo"),
        pl.col("api_id").max().alias("api_hi"),
    )
    return ranges.join(per_call, on="call_id", how="left").select(
        "call_id", pl.col("ops").fill_null(0), "range_lo", "range_hi", "op_lo", "op_hi", "api_lo", "api_hi"
    ).cast(_SPAN_SCHEMA)  # fmt: skip


@dataclass(frozen=True)
class CallsAgain:
    """What :func:`calls_to_read_again` keeps of each call for its timeline (:func:`_call_spans`), and how the
    chosen calls' rows are read and attributed again."""

    spans: pl.DataFrame
    rows: RowIds
    mode: Mode
    rules: RoleRules | None

    def op_counts(self) -> pl.DataFrame:
        """``call_id, _ops``: the GPU ops of each call's ranges."""
        return self.spans.select("call_id", pl.col("ops").cast(pl.Int64).alias("_ops"))

    def attribution(self, call_ids: pl.Series) -> Attribution:
        """The attribution of the rows of *call_ids* read again: their ranges, the ops placed in them and those
        ops' launch calls, attributed alone. Each range nested in a call holds, as in the whole trace, only the
        ops launched inside it, so these rows attribute as they did there (rows of other threads that the
        spans take in as well belong to no chosen call). Where a chosen call's ranges cannot be told apart from
        the trace's end (a range never closed), the whole trace is read and attributed again instead."""
        chosen = self.spans.join(pl.DataFrame({"call_id": call_ids.cast(pl.Int64)}), on="call_id", how="semi")
        if chosen["range_lo"].null_count():
            return attribute(load_trace(self.rows.path), self.mode, self.rules)
        spans = chosen.select(
            pl.concat_list("range_lo", "range_hi").alias("r"), pl.concat_list("op_lo", "op_hi").alias("o"),
            pl.concat_list("api_lo", "api_hi").alias("a"),
        )  # fmt: skip
        pairs = {c: [tuple(v) for v in spans[c].to_list() if v[0] is not None] for c in spans.columns}
        return attribute(load_rows(self.rows, pairs["r"], pairs["o"], pairs["a"]), self.mode, self.rules)


def _finished(calls: pl.DataFrame) -> pl.DataFrame:
    """Call-table rows (CALL_COLUMNS) of *calls* with their op columns; a number column that holds one value (or
    none) in every row kept as that value once, as polars broadcasts a literal: most traces leave most role and
    event columns 0 or null (sweep: 12 of 37), and concatenated parts that agree stay one value."""
    table = with_queue_times(calls).select(CALL_COLUMNS)
    same = []
    for name, dtype in table.schema.items():
        column = table[name]
        if not dtype.is_numeric() or column.len() == 0:
            continue
        if column.null_count() == column.len():
            same.append(pl.lit(None, dtype).alias(name))
        elif column.null_count() == 0 and column.min() == column.max():
            same.append(pl.lit(column[0], dtype).alias(name))
    return table.with_columns(same) if same else table


def _example_name(ranges: pl.DataFrame) -> str:
    """``; a name here reads 'sweep:fa3|q1|3' (message 'fa3|q1|3')``: what --group is matched against."""
    if ranges.height == 0:
        return "; no range here launched GPU work"
    # the first range with the most ops: a call, more likely than a wrapper (the first, so windows agree)
    row = _most_ops(ranges).row(0, named=True)
    message = row["message"]
    name = row["name"]
    return f"; a name here reads {name!r}" + (f" (message {message!r})" if message and message != name else "")


def _most_ops(ranges: pl.DataFrame) -> pl.DataFrame:
    """The first row of *ranges* with the most GPU ops (none when empty)."""
    return ranges.filter(pl.col("gpu_ops") == pl.col("gpu_ops").max()).head(1)


def _read(ranges: pl.DataFrame, pattern: str, column: str) -> pl.DataFrame:
    """The rows of *ranges* whose *column* the grouping *pattern* reads as backend + shape, with ``backend``,
    ``shape`` (as written), ``arm`` and ``iter``."""
    fields = group_fields(pattern)
    if not ranges.select(pl.col(column).str.contains(pattern).any()).item():  # a match test costs less than groups
        return ranges.head(0).with_columns(
            pl.lit(None, pl.String).alias("backend"), pl.lit(None, pl.String).alias("shape"),
            pl.lit(None, pl.String).alias("arm"), pl.lit(None, pl.Int64).alias("iter"),
        )  # fmt: skip
    parts = ranges.select(pl.col(column).str.extract_groups(pattern).alias("_g"))
    g = pl.col("_g").struct
    picked = ranges.with_columns(parts["_g"]).filter(
        g.field("backend").is_not_null() & (g.field("backend") != "") & g.field("shape").is_not_null()
    )
    return picked.with_columns(
        g.field("backend").alias("backend"),
        g.field("shape").alias("shape"),
        (g.field("arm") if "arm" in fields else pl.lit(None, pl.String)).alias("arm"),
        (g.field("iter").cast(pl.Int64, strict=False) if "iter" in fields else pl.lit(None, pl.Int64)).alias("iter"),
    ).drop("_g")


def _short_shape(label: str) -> str:
    """A shape label in its short form (``q8_ctx900k``) where the shape grammar parses it, else as written."""
    try:
        return parse_shape(label).short_name
    except ShapeError:
        return label


def _top(ranges: pl.DataFrame) -> pl.DataFrame:
    """The top-level ranges that can be series of their own: not a runner's flush, hold, lead or warm-up."""
    skip = pl.col("message").is_in([FLUSH, BETWEEN, HOLD, LEAD]) | pl.col("message").str.starts_with(WARMUP)
    return ranges.filter((pl.col("level") == 0) & ~skip.fill_null(False)).drop("message", "level")


def _series(top: pl.DataFrame) -> pl.DataFrame:
    """Top-level ranges (:func:`_top`) as series of their own, an iteration split off only after a separator."""
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
    named = calls.select("shape", "backend", "name").filter(pl.col("shape").is_not_null())
    if named.height == 0:
        examples = ", ".join(repr(s) for s in calls["series"].unique(maintain_order=True).head(2).to_list())
        return f"no range name reads as a backend and a shape (e.g. {examples}): nothing to compare; {hint}"
    # the runs of the names that hold any (a match test first: a big trace's names often hold none): where no
    # name holds one, every group sees the same runs (none), and none is mixed
    has = named.select(has_shape_runs(pl.col("name"))).to_series()
    mixed = named.head(0)
    if has.any():
        runs = pl.concat([
            named.filter(has).select("shape", "backend", shape_runs(pl.col("name")).alias("_runs")),
            named.filter(~has).select("shape", "backend", pl.lit("").alias("_runs")),
        ])  # fmt: skip
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
    chosen = frame.select("shape", "backend").filter(pl.col("shape").is_not_null() & comparable())
    return sorted(chosen["shape"].unique().to_list())
