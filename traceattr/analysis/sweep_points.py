"""A sweep's record read back as data: its usable points, what they decide, and the frames a dispatch table reads.

``sweep.json`` (:class:`traceattr.core.records.SweepRecord`) keeps every measured point of a
``traceattr sweep`` with its side, the ratio t(above) / t(below) and its 95% interval over the paired
calls, each arm's median and every gate. What is used from it is what the sweep itself used: per
ctx its latest measurement, and only where it passed every gate (a refused point is shown, never read
as a side or a time).

* :func:`points` / :func:`replay`: the points as :func:`traceattr.analysis.sweep_steps.decide` took them,
  and the decision they give today (a record written by an older traceattr may say otherwise);
* :func:`usable`: one row per ctx that passed (``ctx, shape, step, side, ratio, low, high`` and the two
  arms' medians ``below_us``, ``above_us``);
* :func:`time_falls`: where an arm's median *falls* as ctx grows, by more than the "same" tolerance:
  its time is not monotone in ctx, so more than one crossover can hide between measured points;
* :func:`dispatch_frames`: the summary rows (with verdicts) and the crossings that
  :func:`traceattr.analysis.dispatch_table.dispatch_table` and ``present.dispatch`` read, built from
  these gated verdicts instead of from traces: ``winner``/``slower`` where one arm is really faster,
  ``tie`` both where neither is (same or ambiguous, ±``tie_pct``: how far the interval reaches from 1).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import Any

import polars as pl

from traceattr.analysis.crossover import CROSSOVER_SCHEMA
from traceattr.analysis.stats import SAME_WITHIN
from traceattr.analysis.sweep_steps import Decision, Point, decide
from traceattr.core.records import SweepPoint, SweepRecord
from traceattr.core.shapes import ShapeError, parse_shape

USABLE_SCHEMA = {
    "ctx": pl.Int64,
    "shape": pl.String,
    "step": pl.Int64,
    "side": pl.String,  # below | above | same | ambiguous (never refused)
    "ratio": pl.Float64,  # t(above) / t(below), with its 95% interval
    "low": pl.Float64,
    "high": pl.Float64,
    "below_us": pl.Float64,  # the two arms' medians (µs)
    "above_us": pl.Float64,
}
SUMMARY_COLUMNS = ("shape", "backend", "median_us", "ratio_to_best", "verdict", "winner", "tie_pct")


def points(record: SweepRecord) -> list[Point]:
    """Every measured point of *record*, in the order measured, as :func:`decide` reads them."""
    return [
        Point(p.ctx, p.side, p.ratio, p.low, p.high, "" if p.side != "refused" else p.refusal)
        for s in record.steps_taken
        for p in s.points
    ]


def replay(record: SweepRecord) -> Decision | None:
    """What :func:`decide` says on *record*'s points with its width and budget (None: no step recorded)."""
    measured = points(record)
    if not measured:
        return None
    h = record.header
    return decide(measured, float(h["width"]), len(record.steps), int(h["max_steps"]))


def usable(record: SweepRecord) -> pl.DataFrame:
    """One row per ctx whose latest measurement passed (see :data:`USABLE_SCHEMA`), by ctx."""
    below, above = record.below, record.above
    latest: dict[int, tuple[int, SweepPoint]] = {}
    for s in record.steps_taken:
        for p in s.points:
            latest[p.ctx] = (s.step, p)
    rows = []
    for ctx, (step, p) in latest.items():
        medians = p.medians_us
        if p.side == "refused" or below is None or above is None or below not in medians or above not in medians:
            continue
        rows.append((ctx, p.shape, step, p.side, p.ratio, p.low, p.high, medians[below], medians[above]))
    return pl.DataFrame(rows, schema=USABLE_SCHEMA, orient="row").sort("ctx")


def time_falls(record: SweepRecord) -> list[tuple[str, int, float, int, float]]:
    """(arm, ctx, µs, next ctx, µs there) wherever an arm's median falls by more than ±1% as ctx grows."""
    pts = usable(record)
    out = []
    for arm, column in ((record.below, "below_us"), (record.above, "above_us")):
        falls = pts.select("ctx", column, pl.col("ctx").shift(-1).alias("next"), pl.col(column).shift(-1).alias("t"))
        falls = falls.filter(pl.col("t") < pl.col(column) * (1 - SAME_WITHIN))
        out += [(str(arm), c, t0, n, t1) for c, t0, n, t1 in falls.iter_rows()]
    return sorted(out, key=lambda f: (f[1], f[0]))


def dispatch_frames(record: SweepRecord) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(summary, crossings) of *record*'s usable points, as the dispatch table reads them (module doc)."""
    below, above = str(record.header.get("below")), str(record.header.get("above"))
    pts = usable(record)
    rows = []
    for r in pts.iter_rows(named=True):
        times = {below: r["below_us"], above: r["above_us"]}
        best = min(times.values())
        winner = {"below": below, "above": above}.get(r["side"])
        tie_pct = None if winner else 100 * _noise(r["low"], r["high"])
        for arm, t in times.items():
            verdict = "tie" if winner is None else "winner" if arm == winner else "slower"
            rows.append((r["shape"], arm, t, t / best, verdict, verdict == "winner", tie_pct))
    schema = {"shape": pl.String, "backend": pl.String, "median_us": pl.Float64, "ratio_to_best": pl.Float64,
              "verdict": pl.String, "winner": pl.Boolean, "tie_pct": pl.Float64}  # fmt: skip
    summary = pl.DataFrame(rows, schema=schema, orient="row")
    return summary, _crossings(pts, below, above)


def _noise(low: float | None, high: float | None) -> float:
    """How far an interval of a ratio reaches from 1 (``stats.Comparison.noise``); inf without one."""
    if low is None or high is None or not math.isfinite(high - low):
        return math.inf
    return max(1 - low, high - 1, 0.0)


def _crossings(pts: pl.DataFrame, below: str, above: str) -> pl.DataFrame:
    """Where the two arms' medians cross between measured ctx, as :func:`analysis.crossover.crossovers` words it.

    ``decided`` where the arm faster below is really faster (gated side) at the lower measured ctx and
    the other at the upper one; where a point next to the crossing ties, the bracket widens to the
    nearest points really decided each way, the medians not crossing back on the way.
    """
    rows = pts.to_dicts()
    family = _family(rows[0]["shape"]) if rows else None
    d = [math.log(r["above_us"] / r["below_us"]) for r in rows]  # < 0: above is faster (medians)
    out, seen = [], set()
    for k, (d0, d1) in enumerate(itertools.pairwise(d)):
        if d0 == 0 or (d0 < 0) == (d1 < 0):
            continue
        # the arm faster below the crossing (by medians) and the side that says it is really faster
        lead, lead_side, other_side = (above, "above", "below") if d0 < 0 else (below, "below", "above")
        x0, x1 = math.log(rows[k]["ctx"]), math.log(rows[k + 1]["ctx"])
        cross = round(math.exp(x0 + d0 / (d0 - d1) * (x1 - x0)))
        lo = _nearest(rows, d, range(k, -1, -1), d0 < 0, lead_side)
        hi = _nearest(rows, d, range(k + 1, len(rows)), d1 < 0, other_side)
        decided = lo is not None and hi is not None
        lo, hi = (lo, hi) if decided else (k, k + 1)
        a, b = rows[lo], rows[hi]  # type: ignore[index]
        at_low = _oriented(a, lead == below)
        at_high = _oriented(b, lead == below)
        noise = None
        if not decided:
            undecided = [
                _noise(r["low"], r["high"]) for r, want in ((a, lead_side), (b, other_side)) if r["side"] != want
            ]
            noise = 100 * max(undecided) if undecided else None
        key = (lead, a["ctx"], b["ctx"])
        if key not in seen:
            seen.add(key)
            other = below if lead == above else above
            out.append((family, lead, other, a["ctx"], b["ctx"], cross, decided, *at_low, *at_high, noise))
    return pl.DataFrame(out, schema=CROSSOVER_SCHEMA, orient="row").sort("family", "crossover_ctx")


def _nearest(rows: list[dict[str, Any]], d: list[float], indices: range, sign: bool, want: str) -> int | None:
    """The nearest index in *indices* whose side is *want*, passing only ties whose medians keep *sign*."""
    for i in indices:
        if d[i] == 0 or (d[i] < 0) != sign:
            return None  # the medians cross back first: not this crossing's bracket
        if rows[i]["side"] == want:
            return i
        if rows[i]["side"] not in ("same", "ambiguous"):
            return None
    return None


def _oriented(r: Mapping[str, Any], lead_is_below: bool) -> tuple[float | None, float | None, float | None]:
    """t(the arm faster above) / t(the arm faster below) at *r*, with its interval (the record's ratio or its inverse)."""
    ratio, low, high = r["ratio"], r["low"], r["high"]
    if lead_is_below:
        return ratio, low, high
    inv = lambda v: None if v is None or v == 0 else 1 / v  # noqa: E731
    return inv(ratio), inv(high), inv(low)


def _family(shape: str) -> str | None:
    try:
        return parse_shape(shape).family
    except ShapeError:
        return None
