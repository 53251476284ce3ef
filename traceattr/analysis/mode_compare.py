"""Eager against ``--graphs``: where a family's choice flips between the modes, and what shipping the eager
table inside CUDA graphs costs.

Input: each mode's dispatch table (:func:`traceattr.analysis.dispatch_table.dispatch_table` of that mode's
decision: the table ``traceattr dispatch`` writes for the mode's inputs alone), so the tables compared are
the ones an engine would load, never a second derivation of them. Per family measured in both modes:

* **flips**: the ctx measured in both modes whose fastest arm (lowest median) differs, each marked decided
  or not per mode (decided: no other arm ties with the fastest there);
* **flip ranges**: the ctx intervals where the two tables pick different arms (a breakpoint that moved, or
  a segment one mode has and the other has not), with the graphs-measured ctx inside each (none: the range
  lies between measured points, and its cost is not measured) and, as an estimate only, the worst
  t_graphs(eager arm) / t_graphs(graphs arm) − 1 across it with log t interpolated linearly in log ctx
  between the graphs points (the graph-safe choice's interpolation), the range clamped to the measured ctx;
* **regret under graphs** of the eager table: at every ctx the graphs inputs measured,
  t_graphs(eager table's arm) / t_graphs(fastest) − 1 (:class:`~traceattr.analysis.dispatch_table.Regret`:
  mean, max, right/shapes, and where the eager choice was not measured under graphs).

Pure functions of the tables: no GPU, tested on the H200 records in ``examples/sweeps/``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

# _times: the one interpolation of a family's times between measured ctx (the graph-safe choice's), not a second
from traceattr.analysis.dispatch_table import DispatchTable, FamilyTable, Regret, _times, dispatch_table
from traceattr.analysis.segments import Segment, lookup
from traceattr.analysis.sweep_points import dispatch_frames
from traceattr.core.errors import TraceattrError
from traceattr.core.records import SweepRecord


@dataclass(frozen=True)
class Flip:
    """A ctx measured in both modes whose fastest arm differs."""

    ctx: int
    eager: str
    graphs: str
    eager_decided: bool
    graphs_decided: bool


@dataclass(frozen=True)
class FlipRange:
    """``[ctx_from, ctx_to)`` (None: open) where the eager table picks ``eager`` and the graphs table ``graphs``."""

    ctx_from: int | None
    ctx_to: int | None
    eager: str
    graphs: str
    graphs_measured: tuple[int, ...]  # the graphs points inside: where the flip's cost is measured
    interpolated_max: float | None  # an estimate between points (module doc); None: an arm not measured under graphs


@dataclass(frozen=True)
class Shipped:
    """One graphs-measured ctx: what the eager table picks there and what that costs under graphs."""

    ctx: int
    shape: str
    eager_choice: str | None
    graphs_choice: str | None
    fastest: str  # under graphs
    regret: float | None  # None: the eager choice was not measured under graphs
    right: bool  # the eager choice is the fastest under graphs or ties with it


@dataclass(frozen=True)
class ModeComparison:
    """One family measured in both modes."""

    family: str
    eager: FamilyTable
    graphs: FamilyTable
    common_ctx: tuple[int, ...]
    flips: tuple[Flip, ...]
    flip_ranges: tuple[FlipRange, ...]
    shipped: tuple[Shipped, ...]  # per graphs point, by ctx
    regret: Regret  # the eager table's under graphs (graphs.regret: the graphs table's own, in-sample)


@dataclass(frozen=True)
class ModesComparison:
    """Every family of two modes' tables: compared where both measured it, named where only one did."""

    eager: DispatchTable
    graphs: DispatchTable
    families: tuple[ModeComparison, ...]
    only_eager: tuple[str, ...]
    only_graphs: tuple[str, ...]


def _decided(table: FamilyTable, ctx: int) -> bool:
    point = next(p for p in table.points if p.ctx == ctx)
    return point.good == {point.fastest}  # no other arm ties with the fastest


def flip_ranges(eager: FamilyTable, graphs: FamilyTable) -> tuple[FlipRange, ...]:
    """The ctx intervals where the two tables' segments pick different arms, neighbours with the same pair merged."""
    cuts = sorted({c for s in (*eager.segments, *graphs.segments) for c in (s.ctx_from, s.ctx_to) if c is not None})
    bounds: list[int | None] = [None, *cuts, None]
    spans: list[tuple[int | None, int | None, str, str]] = []
    for lo, hi in itertools.pairwise(bounds):
        probe = lo if lo is not None else (hi - 1 if hi is not None else 1)
        x, y = _pick(eager.segments, probe), _pick(graphs.segments, probe)
        if x == y:
            continue
        if spans and spans[-1][1] == lo and spans[-1][2:] == (x, y):
            spans[-1] = (spans[-1][0], hi, x, y)  # one range across a cut that changes neither choice
        else:
            spans.append((lo, hi, x, y))
    return tuple(
        FlipRange(
            lo,
            hi,
            x,
            y,
            tuple(p.ctx for p in graphs.points if _inside(p.ctx, lo, hi)),
            _interpolated(graphs, x, y, lo, hi),
        )
        for lo, hi, x, y in spans
    )


def _interpolated(graphs: FamilyTable, shipped: str, best: str, lo: int | None, hi: int | None) -> float | None:
    """The worst interpolated t(shipped) / t(best) − 1 under graphs over ``[lo, hi)`` clamped to the measured ctx."""
    pts = graphs.points
    if not all(shipped in p.median_us and best in p.median_us for p in pts):
        return None
    first, last = min(p.ctx for p in pts), max(p.ctx for p in pts)
    a, b = max(lo or first, first), min(hi or last, last)
    if a > b:  # the range lies wholly beyond the measured ctx: an extrapolation, not an estimate
        return None
    inside = [p.ctx for p in pts if a <= p.ctx <= b]  # the measured points too: the worst may sit on one
    x = np.union1d(np.geomspace(a, b, 33) if b > a else np.array([float(a)]), np.array(inside, dtype=float))
    return float(np.max(_times(pts, shipped, x) / _times(pts, best, x) - 1))


def _pick(segments: tuple[Segment, ...], ctx: int) -> str:
    arm = lookup(segments, ctx)
    if arm is None:  # the decision's segments tile every ctx; a gap is a bug upstream, not an answer
        raise TraceattrError(f"a dispatch table with no segment at ctx {ctx}")
    return arm


def _inside(ctx: int, lo: int | None, hi: int | None) -> bool:
    return (lo is None or ctx >= lo) and (hi is None or ctx < hi)


def compare_family(eager: FamilyTable, graphs: FamilyTable) -> ModeComparison:
    """The comparison of the module doc for one family's two tables."""
    if eager.family != graphs.family:
        raise TraceattrError(f"two families: {eager.family} eager, {graphs.family} with graphs")
    e_at = {p.ctx: p for p in eager.points}
    common = tuple(sorted(set(e_at) & {p.ctx for p in graphs.points}))
    flips = tuple(
        Flip(g.ctx, e_at[g.ctx].fastest, g.fastest, _decided(eager, g.ctx), _decided(graphs, g.ctx))
        for g in graphs.points
        if g.ctx in e_at and e_at[g.ctx].fastest != g.fastest
    )
    pairs = [(g, lookup(eager.segments, g.ctx)) for g in graphs.points]
    shipped = tuple(
        Shipped(g.ctx, g.shape, arm, lookup(graphs.segments, g.ctx), g.fastest, g.regret(arm), arm in g.good)
        for g, arm in pairs
    )
    return ModeComparison(eager.family, eager, graphs, common, flips, flip_ranges(eager, graphs), shipped,
                          Regret.of(pairs))  # fmt: skip


def compare_tables(eager: DispatchTable, graphs: DispatchTable) -> ModesComparison:
    """Each family of both tables compared (:func:`compare_family`); refused when no family is in both."""
    g_by = {t.family: t for t in graphs.families}
    e_names = [t.family for t in eager.families]
    both = [(t, g_by[t.family]) for t in eager.families if t.family in g_by]
    if not both:
        raise TraceattrError(f"no family measured in both modes: eager {', '.join(e_names) or 'none'}, "
                             f"with graphs {', '.join(g_by) or 'none'}")  # fmt: skip
    return ModesComparison(
        eager,
        graphs,
        tuple(compare_family(e, g) for e, g in both),
        tuple(f for f in e_names if f not in g_by),
        tuple(f for f in g_by if f not in e_names),
    )


def compare_modes(eager: SweepRecord, graphs: SweepRecord) -> ModeComparison:
    """Two sweeps of one family and two arms, one per mode: their tables (``dispatch_frames``) compared."""
    for record, want in ((eager, False), (graphs, True)):
        if bool(record.header.get("graphs")) != want:
            raise TraceattrError(f"the {'graphs' if want else 'eager'} record was measured with graphs={not want}")
    family = str(eager.header.get("family"))
    if graphs.header.get("family") != family:
        raise TraceattrError(f"two families: {family} eager, {graphs.header.get('family')} with graphs")
    arms = {eager.header.get("below"), eager.header.get("above")}
    if {graphs.header.get("below"), graphs.header.get("above")} != arms:
        raise TraceattrError(f"different arms: {sorted(map(str, arms))} eager, "
                             f"{graphs.header.get('below')}/{graphs.header.get('above')} with graphs")  # fmt: skip
    (one,) = compare_tables(dispatch_table(*dispatch_frames(eager)), dispatch_table(*dispatch_frames(graphs))).families
    return one
