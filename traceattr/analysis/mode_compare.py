"""Eager against ``--graphs``: where a family's choice flips between the modes, and what shipping the eager
table inside CUDA graphs costs.

Input: two sweeps (``search.json`` records) of one family, one eager and one with ``--graphs``. Each mode's
usable points (:func:`traceattr.analysis.search_points.usable`: the latest measurement per ctx that passed)
give its fastest arm per ctx (the lower median; ``decided`` when the point's interval excludes a tie) and a
table: the fastest arm per measured ctx, a breakpoint at the geometric middle of two neighbouring points whose
fastest arms differ, the ends extrapolated (as :func:`traceattr.jobs.decode_summary.derive_family` derives a
table from a grid).

* **flips**: the ctx measured in both modes whose fastest arm differs, each marked decided or not per mode.
* **flip ranges**: the ctx intervals where the two tables pick different arms (a breakpoint that moved).
* **regret under graphs** of the eager table: at every ctx the graphs sweep measured,
  t_graphs(eager table's arm) / t_graphs(fastest) − 1; mean and max.

Pure functions of the records: no GPU, tested on the H200 records in ``examples/sweeps/``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from traceattr.analysis.search_points import usable
from traceattr.core.errors import TraceattrError
from traceattr.core.records import SearchRecord

Segments = tuple[tuple[int | None, int | None, str], ...]  # (ctx_from, ctx_to, arm): [from, to), None open


@dataclass(frozen=True)
class ModePoint:
    ctx: int
    fastest: str
    decided: bool  # the point's interval excludes a tie (side below/above), not "ambiguous"
    medians_us: dict[str, float]


@dataclass(frozen=True)
class Flip:
    ctx: int
    eager: str
    graphs: str
    eager_decided: bool
    graphs_decided: bool


@dataclass(frozen=True)
class ModeComparison:
    family: str
    arms: tuple[str, str]
    eager: tuple[ModePoint, ...]
    graphs: tuple[ModePoint, ...]
    eager_table: Segments
    graphs_table: Segments
    common_ctx: tuple[int, ...]
    flips: tuple[Flip, ...]
    flip_ranges: tuple[tuple[int | None, int | None, str, str], ...]  # (from, to, eager arm, graphs arm)
    regret_under_graphs: dict[int, float]  # graphs-measured ctx -> regret of the eager table's choice
    regret_mean: float
    regret_max: float


def mode_points(record: SearchRecord) -> tuple[ModePoint, ...]:
    below, above = str(record.header.get("below")), str(record.header.get("above"))
    out = []
    for r in usable(record).iter_rows(named=True):
        medians = {below: r["below_us"], above: r["above_us"]}
        fastest = min(medians, key=lambda a: medians[a])
        out.append(ModePoint(r["ctx"], fastest, r["side"] in ("below", "above"), medians))
    return tuple(out)


def table_of(points: Sequence[ModePoint]) -> Segments:
    """The fastest arm per measured ctx, cut at the geometric middle where it changes."""
    if not points:
        raise TraceattrError("a mode with no usable point has no table")
    pts = sorted(points, key=lambda p: p.ctx)
    segments: list[tuple[int | None, int | None, str]] = []
    lo: int | None = None
    for a, b in itertools.pairwise(pts):
        if a.fastest != b.fastest:
            cut = round(math.sqrt(a.ctx * b.ctx))
            segments.append((lo, cut, a.fastest))
            lo = cut
    segments.append((lo, None, pts[-1].fastest))
    return tuple(segments)


def pick(table: Segments, ctx: int) -> str:
    return next(arm for lo, hi, arm in table if (lo is None or ctx >= lo) and (hi is None or ctx < hi))


def _differences(a: Segments, b: Segments) -> tuple[tuple[int | None, int | None, str, str], ...]:
    cuts = sorted({c for lo, hi, _ in (*a, *b) for c in (lo, hi) if c is not None})
    bounds: list[int | None] = [None, *cuts, None]
    out: list[tuple[int | None, int | None, str, str]] = []
    for lo, hi in itertools.pairwise(bounds):
        probe = lo if lo is not None else (hi - 1 if hi is not None else 1)
        x, y = pick(a, probe), pick(b, probe)
        if x == y:
            continue
        if out and out[-1][1] == lo and out[-1][2:] == (x, y):
            out[-1] = (out[-1][0], hi, x, y)  # one range across a cut that changes neither choice
        else:
            out.append((lo, hi, x, y))
    return tuple(out)


def compare_modes(eager: SearchRecord, graphs: SearchRecord) -> ModeComparison:
    """The comparison in the module doc; both records must be one family and the same two arms, one per mode."""
    for record, want in ((eager, False), (graphs, True)):
        if bool(record.header.get("graphs")) != want:
            raise TraceattrError(f"the {'graphs' if want else 'eager'} record was measured with graphs={not want}")
    family = str(eager.header.get("family"))
    if graphs.header.get("family") != family:
        raise TraceattrError(f"two families: {family} eager, {graphs.header.get('family')} with graphs")
    arms = (str(eager.header.get("below")), str(eager.header.get("above")))
    if {graphs.header.get("below"), graphs.header.get("above")} != set(arms):
        raise TraceattrError(f"different arms: {arms} eager, {graphs.header.get('below')}/{graphs.header.get('above')}")
    ep, gp = mode_points(eager), mode_points(graphs)
    et, gt = table_of(ep), table_of(gp)
    by_ctx = {p.ctx: p for p in ep}
    common = tuple(sorted(set(by_ctx) & {p.ctx for p in gp}))
    flips = tuple(
        Flip(g.ctx, by_ctx[g.ctx].fastest, g.fastest, by_ctx[g.ctx].decided, g.decided)
        for g in sorted(gp, key=lambda p: p.ctx)
        if g.ctx in by_ctx and by_ctx[g.ctx].fastest != g.fastest
    )
    regret = {g.ctx: g.medians_us[pick(et, g.ctx)] / min(g.medians_us.values()) - 1 for g in gp}
    values = list(regret.values())
    return ModeComparison(family, arms, ep, gp, et, gt, common, flips, _differences(et, gt), regret,
                          sum(values) / len(values), max(values))  # fmt: skip
