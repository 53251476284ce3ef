"""Interval algebra on polars frames: same-thread containment and unions.

Containment is nsys's rule: ``outer.start <= inner.start`` and
``inner.end <= outer.end`` on the same thread, bounds inclusive.

Two algorithms give the same answer:

* **Laminar threads** (every two ranges are nested or disjoint as closed
  intervals, which push/pop ranges always are): ranges sorted by
  ``(start, end desc, id)`` are a preorder walk of their nesting forest. A
  range's level is the number of ranges still open when it starts (a binary
  search over sorted ends), its parent the last range before it one level up
  (an as-of join), and a call's ranges are found from the last range started
  before it, climbing parents while they end too early. O(n log n), no
  pairwise work.
* **Other threads** (overlapping start/end ranges, touching boundaries): a
  two-inequality ``join_where`` (IEJoin) on keys that fold the thread into
  the time axis (thread rank × span + time), so the thread equality costs
  nothing and nothing is compared across threads.

``RangeIndex`` checks laminarity per thread and routes each thread to one of
them; the property tests hold both to a brute-force reference.
"""

from __future__ import annotations

import polars as pl

from traceattr.core.keys import rows_at, scatter_rows
from traceattr.trace.typed import int_of

_MAX_KEY = 1 << 62


class RangeIndex:
    """Ranges of many threads (``range_id, global_tid, start, end``), indexed."""

    def __init__(self, ranges: pl.DataFrame) -> None:
        self.ranges = ranges.select("range_id", "global_tid", "start", "end").filter(pl.col("global_tid").is_not_null())
        self._forest, self._general = _split_laminar(self.ranges)
        self._tree: pl.DataFrame | None = None

    def tree(self) -> pl.DataFrame:
        """``range_id, parent_id, level, root_id`` by nsys's tightest-container rule."""
        if self._tree is None:
            parts = [_forest_roots(self._forest)]
            if self._general.height:
                tree = _general_parents(self._general)
                parts.append(tree.join(_levels(tree), on="range_id", how="left"))
            schema = pl.Schema({"range_id": pl.Int64, "parent_id": pl.Int64, "level": pl.Int64, "root_id": pl.Int64})
            self._tree = pl.concat(parts, how="vertical_relaxed").select(list(schema)).cast(schema)
        return self._tree

    def locate(self, calls: pl.DataFrame, *, ancestors: bool = True) -> tuple[pl.DataFrame, pl.DataFrame]:
        """Ranges holding each call (``call_id, global_tid, start, end``).

        Returns ``(every, deepest)``: all (call_id, range_id) pairs, and the
        single deepest holding range per call. Without *ancestors*, ``every``
        leaves out the laminar threads' pairs (each is the deepest range and
        its ancestors: :meth:`subtrees` answers for those without pairs).
        """
        schema = pl.Schema({"call_id": calls.schema["call_id"], "range_id": pl.Int64()})
        calls = calls.select("call_id", "global_tid", "start", "end").filter(pl.col("global_tid").is_not_null())
        every, deepest = [pl.DataFrame(schema=schema)], [pl.DataFrame(schema=schema)]
        if self._forest.height:
            lam = (
                calls
                if _one_thread(self._forest, calls)
                else calls.join(self._forest.select("global_tid").unique(), on="global_tid", how="semi")
            )
            inner = _forest_deepest(self._forest, lam)
            deepest.append(inner)
            if ancestors:
                every.append(_with_ancestors(inner, self._forest))
        if self._general.height:
            gen = calls.join(self._general.select("global_tid").unique(), on="global_tid", how="semi")
            pairs = contained_pairs(gen, self._general, inner_id="call_id", outer_id="range_id")
            every.append(pairs)
            deepest.append(
                pairs.join(self.tree().select("range_id", "level"), on="range_id")
                .sort("call_id", "level", "range_id", descending=[False, True, True])
                .unique("call_id", keep="first")
                .select("call_id", "range_id")
            )
        return (
            pl.concat(every, how="vertical_relaxed").cast(schema),
            pl.concat(deepest, how="vertical_relaxed").cast(schema),
        )

    def subtrees(self) -> pl.DataFrame:
        """``range_id, first, stop`` of every laminar-thread range, in preorder.

        Ranges numbered 0, 1, … in preorder (threads one after another): a
        range's subtree is the ranges numbered ``first`` up to ``stop`` (not
        included) — itself and the ranges after it on its thread that start
        before it ends, all of which it holds (laminar).
        """
        if self._forest.height == 0:
            return pl.DataFrame(schema={"range_id": pl.Int64, "first": pl.Int64, "stop": pl.Int64})
        axis = _axis(self._forest)
        assert axis is not None, "the forest was built on a folded axis of these ranges and more"
        nodes = _fold(self._forest, *axis).sort("pre")  # ks ascending: the preorder sorted (thread, start) first
        stop = nodes["ks"].search_sorted(nodes["ke"], side="right")
        return nodes.select("range_id", pl.int_range(pl.len(), dtype=pl.Int64).alias("first"),
                            stop.cast(pl.Int64).alias("stop"))  # fmt: skip

    def ancestors(self, pairs: pl.DataFrame, id_col: str) -> pl.DataFrame:
        """Expand (*id_col*, laminar range_id) to (*id_col*, that range and each range holding it)."""
        return _with_ancestors(pairs.rename({id_col: "call_id"}), self._forest).rename({"call_id": id_col})


# -- laminar threads ------------------------------------------------------------------


def _one_thread(*frames: pl.DataFrame) -> bool:
    """Every row of *frames* on one and the same thread (a single-threaded capture): nothing to filter."""
    tids = [f["global_tid"] for f in frames if f.height]
    if not tids or any(t.null_count() for t in tids):
        return False
    first = tids[0].min()
    return all(t.min() == first == t.max() for t in tids)


def _fold(df: pl.DataFrame, threads: pl.DataFrame, t0: int, span: int) -> pl.DataFrame:
    if threads.height == 1:  # the usual single-threaded capture: a filter, not a join
        if not _one_thread(threads, df):  # a filter copies every column: only when rows go
            df = df.filter(pl.col("global_tid") == threads["global_tid"][0])
        df = df.with_columns(pl.lit(0, pl.Int64).alias("_rank"))
    else:
        df = df.join(threads, on="global_tid", how="inner")
    return df.with_columns(
        (pl.col("_rank") * span + (pl.col("start") - t0)).alias("ks"),
        (pl.col("_rank") * span + (pl.col("end") - t0)).alias("ke"),
    )


def _axis(*frames: pl.DataFrame) -> tuple[pl.DataFrame, int, int] | None:
    """Thread ranks, origin and span of a folded (thread, time) axis; None if it overflows."""
    frames = tuple(f for f in frames if f.height)
    if not frames:
        return None
    # per-frame summaries: no concatenated copy of millions of rows
    bounds = pl.concat([f.select(pl.col("start").min().alias("lo"), pl.max_horizontal(pl.col("end").max(),
                                 pl.col("start").max()).alias("hi")) for f in frames])  # fmt: skip
    t0 = int_of(bounds["lo"].min())
    span = int_of(bounds["hi"].max()) - t0 + 1
    threads = (
        pl.concat([f.select(pl.col("global_tid").unique()) for f in frames])
        .select(pl.col("global_tid").unique().sort())
        .with_row_index("_rank")
        .with_columns(pl.col("_rank").cast(pl.Int64))
    )
    if threads.height * span >= _MAX_KEY:
        return None
    return threads, t0, span


def _preorder(ranges: pl.DataFrame) -> pl.DataFrame:
    """Nesting forest of *ranges*: preorder index, level, parent, laminar flag per thread."""
    axis = _axis(ranges)
    if axis is None:
        return ranges.with_columns(
            pl.lit(None, pl.Int64).alias("parent_id"), pl.lit(None, pl.Int64).alias("level"), pl.lit(False).alias("ok")
        )
    threads, t0, span = axis
    nodes = _fold(ranges, threads, t0, span)
    ks, ke, rid = pl.col("ks"), pl.col("ke"), pl.col("range_id")
    # (start, end descending, id) order; NVTX rows usually come in it already: a check instead of a sort
    before = (ks > ks.shift(1)) | (
        (ks == ks.shift(1)) & ((ke < ke.shift(1)) | ((ke == ke.shift(1)) & (rid > rid.shift(1))))
    )
    if not nodes.select(before.fill_null(True).all()).item():
        nodes = nodes.sort(["ks", "ke", "range_id"], descending=[False, True, False])
    nodes = nodes.with_row_index("pre").with_columns(pl.col("pre").cast(pl.Int64))
    ends = nodes["ke"].sort()
    # ranges open at a range's start = earlier in preorder and not ended before it
    closed_before = ends.search_sorted(nodes["ks"], side="left").cast(pl.Int64)
    nodes = nodes.with_columns((pl.col("pre") - closed_before).alias("level"))
    nodes = nodes.hstack(_parents(nodes).get_columns())
    valid = (pl.col("level") == 0) | (
        (pl.col("_plevel") == pl.col("level") - 1)
        & (pl.col("_ptid") == pl.col("global_tid"))
        & (pl.col("_pke") >= pl.col("ke"))
    )
    nodes = nodes.with_columns(
        pl.when(pl.col("level") == 0).then(None).otherwise(pl.col("parent_id")).alias("parent_id"),
        (
            valid.fill_null(False).all() if threads.height == 1 else valid.fill_null(False).all().over("global_tid")
        ).alias("ok"),
    )
    return nodes.select("range_id", "global_tid", "start", "end", "parent_id", "level", "pre", "ok")


_FILL_LEVELS = 32  # up to this depth, parents by one forward fill per level instead of sorts and an as-of join


def _parents(nodes: pl.DataFrame) -> pl.DataFrame:
    """``parent_id, _ptid, _pke, _plevel``: the last node before each, in preorder, one level up.

    In a laminar thread that is the parent; elsewhere it is checked and found wanting (or missing).
    """
    level, pre = pl.col("level"), pl.col("pre")
    lowest, depth = nodes["level"].min(), nodes["level"].max()
    if lowest is not None and depth is not None and int_of(lowest) >= 0 and int_of(depth) <= _FILL_LEVELS:
        # the last node of level L - 1 so far, read at the nodes of level L: one pass per level
        up = [
            pl.when(level == lv).then(pl.when(level == lv - 1).then(pre).forward_fill())
            for lv in range(1, int_of(depth) + 1)
        ]
        at = (
            nodes.select(pl.coalesce(up)).to_series()
            if up
            else pl.repeat(None, nodes.height, dtype=pl.Int64, eager=True)
        )
        named = {"range_id": "parent_id", "global_tid": "_ptid", "ke": "_pke", "level": "_plevel"}
        return pl.DataFrame([nodes[c].gather(at).alias(out) for c, out in named.items()])  # pre is the row
    n = nodes.height + 1  # levels too deep or out of shape: an as-of join on (level, pre) keys
    left = nodes.select("pre", ((level - 1) * n + pre).alias("_k")).sort("_k")
    right = nodes.select(
        pl.col("range_id").alias("parent_id"),
        pl.col("global_tid").alias("_ptid"),
        pl.col("ke").alias("_pke"),
        (level * n + pre).alias("_k"),
        level.alias("_plevel"),
    ).sort("_k")
    parents = left.join_asof(right, on="_k", strategy="backward", allow_exact_matches=False).select(
        "pre", "parent_id", "_ptid", "_pke", "_plevel"
    )
    return scatter_rows(parents, "pre", nodes.height)  # pre is the row


def _forest_roots(forest: pl.DataFrame) -> pl.DataFrame:
    """Forest tree rows with their root: the last level-0 range at or before each in preorder."""
    roots = forest.filter(pl.col("level") == 0).select("pre", pl.col("range_id").alias("root_id")).sort("pre")
    return (
        forest.select("range_id", "parent_id", "level", "pre")
        .sort("pre")
        .join_asof(roots, on="pre", strategy="backward")
        .select("range_id", "parent_id", "level", "root_id")
    )


def _split_laminar(ranges: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(forest nodes of laminar threads, plain ranges of the other threads)."""
    if ranges.height == 0:
        empty = {c: pl.Int64 for c in ("range_id", "global_tid", "start", "end", "parent_id", "level", "pre")}
        return pl.DataFrame(schema=empty), ranges
    nodes = _preorder(ranges)
    forest = nodes.drop("ok") if nodes["ok"].all() else nodes.filter(pl.col("ok")).drop("ok")
    general = ranges.join(nodes.filter(~pl.col("ok")).select("range_id"), on="range_id", how="semi")
    return forest, general


def _forest_deepest(forest: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """(call_id, range_id) of the deepest forest range holding each call."""
    schema = pl.Schema({"call_id": calls.schema["call_id"], "range_id": pl.Int64()})
    if calls.height == 0:
        return pl.DataFrame(schema=schema)
    axis = _axis(forest, calls)
    if axis is None:  # timestamps too far apart to fold: the general join, then the deepest
        pairs = contained_pairs(calls, forest, inner_id="call_id", outer_id="range_id")
        return (
            pairs.join(forest.select("range_id", "level"), on="range_id")
            .sort("call_id", "level", descending=[False, True])
            .unique("call_id", keep="first")
            .select("call_id", "range_id")
        )
    threads, t0, span = axis
    nodes = _fold(forest.select("range_id", "global_tid", "start", "end", "parent_id", "pre"), threads, t0, span)
    q = _sorted(_fold(calls, threads, t0, span).select("call_id", "ks", "ke", "global_tid"), "ks")
    # the last range, in preorder, that started at or before the call: in preorder ks never decreases,
    # so ranges sharing a start are one run and its last row is kept (no hash of a million keys)
    nodes = _sorted(nodes, "pre")
    starts = nodes.filter(pl.col("ks").ne_missing(pl.col("ks").shift(-1))).select(
        "ks", pl.col("range_id").alias("cand"), pl.col("global_tid").alias("_ctid")
    )
    hit = q.join_asof(starts, on="ks", strategy="backward").filter(pl.col("_ctid") == pl.col("global_tid"))
    # ... or the nearest of its ancestors that has not ended before the call ends
    up = nodes.select(pl.col("range_id").alias("cand"), pl.col("ke").alias("_cke"), pl.col("parent_id").alias("_up"))
    found = [pl.DataFrame(schema=schema)]
    todo = hit.select("call_id", "ke", "cand")
    while todo.height:
        todo = todo.hstack(rows_at(up, "cand", todo["cand"]).get_columns())  # every candidate is a forest range
        ok = pl.col("_cke") >= pl.col("ke")
        found.append(todo.filter(ok).select("call_id", pl.col("cand").alias("range_id")))
        todo = todo.filter(~ok & pl.col("_up").is_not_null()).select("call_id", "ke", pl.col("_up").alias("cand"))
    return pl.concat(found, how="vertical_relaxed").cast(schema)


def _sorted(frame: pl.DataFrame, column: str) -> pl.DataFrame:
    """*frame* sorted by *column*; a check instead of a sort when it already is (calls and forests come
    in time order), and the column flagged sorted so the as-of join trusts it."""
    if not frame[column].is_sorted():
        return frame.sort(column)
    return frame.with_columns(pl.col(column).set_sorted())


def _with_ancestors(pairs: pl.DataFrame, forest: pl.DataFrame) -> pl.DataFrame:
    """Expand (call, deepest range) to (call, every range up to the root)."""
    parent = forest.select("range_id", "parent_id")
    level = pairs.select("call_id", "range_id")
    out = [level]
    while level.height:
        level = level.join(parent, on="range_id", how="inner").filter(pl.col("parent_id").is_not_null())
        level = level.select("call_id", pl.col("parent_id").alias("range_id"))
        out.append(level)
    return pl.concat(out)


# -- general threads ---------------------------------------------------------------------


def contained_pairs(
    inner: pl.DataFrame, outer: pl.DataFrame, *, inner_id: str, outer_id: str, thread: str = "global_tid"
) -> pl.DataFrame:
    """All (inner_id, outer_id) with inner inside outer on the same thread (IEJoin)."""
    schema = pl.Schema({inner_id: inner.schema[inner_id], outer_id: outer.schema[outer_id]})
    inner = inner.filter(pl.col(thread).is_not_null())
    outer = outer.filter(pl.col(thread).is_not_null())
    if inner.height == 0 or outer.height == 0:
        return pl.DataFrame(schema=schema)
    rename = {thread: "global_tid"} if thread != "global_tid" else {}
    axis = _axis(inner.rename(rename), outer.rename(rename))
    if axis is None:  # timestamps too far apart to fold: join thread by thread
        parts = [
            contained_pairs(inner.filter(pl.col(thread) == t), outer.filter(pl.col(thread) == t),
                            inner_id=inner_id, outer_id=outer_id, thread=thread)
            for t in outer[thread].unique().to_list()
        ]  # fmt: skip
        return pl.concat(parts) if parts else pl.DataFrame(schema=schema)
    threads, t0, span = axis
    left = _fold(inner.rename(rename), threads, t0, span).select(
        inner_id, pl.col("ks").alias("_is"), pl.col("ke").alias("_ie")
    )
    right = _fold(outer.rename(rename), threads, t0, span).select(
        outer_id, pl.col("ks").alias("_os"), pl.col("ke").alias("_oe")
    )
    return left.join_where(right, pl.col("_is") >= pl.col("_os"), pl.col("_ie") <= pl.col("_oe")).select(
        inner_id, outer_id
    )


def _general_parents(ranges: pl.DataFrame) -> pl.DataFrame:
    """Tightest container per range (nsys's rule), by an all-pairs join.

    nsys leaves ties to SQLite's scan order (identical intervals become each
    other's parent and fall out of its tree); here of identical intervals the
    lower range_id is the outer one, and among equally tight containers the
    higher range_id wins, which is what the laminar walk gives too.
    """
    base = ranges.select("range_id", "global_tid", "start", "end")
    pairs = contained_pairs(
        base.rename({"range_id": "child_id"}), base.rename({"range_id": "parent_id"}),
        inner_id="child_id", outer_id="parent_id",
    )  # fmt: skip
    bounds = base.select("range_id", "start", "end")
    same = (pl.col("cs") == pl.col("ps")) & (pl.col("ce") == pl.col("pe"))
    parents = (
        pairs.filter(pl.col("child_id") != pl.col("parent_id"))
        .join(bounds.rename({"range_id": "child_id", "start": "cs", "end": "ce"}), on="child_id")
        .join(bounds.rename({"range_id": "parent_id", "start": "ps", "end": "pe"}), on="parent_id")
        .filter(~(same & (pl.col("parent_id") > pl.col("child_id"))))
        .with_columns(((pl.col("cs") - pl.col("ps")) + (pl.col("pe") - pl.col("ce"))).alias("tightness"))
        .sort("child_id", "tightness", "parent_id", descending=[False, False, True])
        .unique("child_id", keep="first")
        .select(pl.col("child_id").alias("range_id"), "parent_id")
    )
    return base.select("range_id").join(parents, on="range_id", how="left")


def _levels(tree: pl.DataFrame) -> pl.DataFrame:
    """Depth and root of each node by pointer doubling: O(log depth) joins, not O(depth)."""
    state = tree.select(
        "range_id",
        pl.col("parent_id").alias("jump"),
        pl.when(pl.col("parent_id").is_null()).then(0).otherwise(1).cast(pl.Int64).alias("hops"),
        pl.coalesce("parent_id", "range_id").alias("root_id"),
    )
    for _ in range(64):  # 2**64 levels: a loop past this means a parent cycle
        if state["jump"].is_null().all():
            break
        ahead = state.select(
            pl.col("range_id").alias("jump"), pl.col("jump").alias("next"), pl.col("hops").alias("more"),
            pl.col("root_id").alias("_root"),
        )  # fmt: skip
        state = state.join(ahead, on="jump", how="left").select(
            "range_id",
            pl.col("next").alias("jump"),
            (pl.col("hops") + pl.col("more").fill_null(0)).alias("hops"),
            pl.coalesce("_root", "root_id").alias("root_id"),
        )
    else:
        raise AssertionError("NVTX range parents form a cycle")
    return state.select("range_id", pl.col("hops").alias("level"), "root_id")


def union_length(df: pl.DataFrame, group: str, start: str = "start", end: str = "end") -> pl.DataFrame:
    """Per integer *group*, the total length covered by the union of its intervals.

    Sorted by start, an interval adds only what reaches past the furthest end
    seen before it: ``max(0, end - max(start, prior max end))``. Groups are
    laid end to end on one axis (group offset × span + time) so one global
    running maximum serves every group, instead of a window per group.
    """
    out_schema = pl.Schema({group: df.schema[group], "busy_ns": pl.Int64()})
    if df.height == 0:
        return pl.DataFrame(schema=out_schema)
    t0, t1 = df[start].min(), df[end].max()
    g0, g1 = df[group].min(), df[group].max()
    span = max(int_of(t1), int_of(df[start].max())) - int_of(t0) + 1
    if (int_of(g1) - int_of(g0) + 1) * span < _MAX_KEY:
        offset = (pl.col(group) - g0).cast(pl.Int64) * span - t0
        ordered = df.select(group, (pl.col(start) + offset).alias("_s"), (pl.col(end) + offset).alias("_e")).sort("_s")
        prior_end = pl.col("_e").cum_max().shift(1)
    else:  # too wide to lay out on one axis: a running maximum per group
        ordered = df.select(group, pl.col(start).alias("_s"), pl.col(end).alias("_e")).sort(group, "_s")
        prior_end = pl.col("_e").cum_max().shift(1).over(group)
    covered = (pl.col("_e") - pl.max_horizontal(pl.col("_s"), prior_end.fill_null(pl.col("_s")))).clip(lower_bound=0)
    # the running maximum must see the whole ordered column: compute it before grouping
    ordered = ordered.with_columns(covered.alias("_covered"))
    return ordered.group_by(group).agg(pl.col("_covered").sum().alias("busy_ns")).cast(out_schema)
