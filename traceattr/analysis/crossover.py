"""Where the winner changes along the context axis: decision rules from a sweep.

Shapes that differ only in ctx form a family (q, heads, batch, page, dtype,
pattern alike). Along each family's ctx axis, two backends cross where their
median times are equal; the crossing is interpolated log-linearly between
the two measured ctx points that bracket the sign change of log(t_a / t_b).
The crossings of one pair are found when :mod:`traceattr.analysis.decision`
asks for them: the pairs of arms that meet where a family's line switches.

A crossing is a *decision rule* (``decided``) only where the interval of the
ratio of medians (per-call samples, :func:`traceattr.analysis.stats.compare_samples`)
excludes 1 at both measured points, each in its own direction: the backend
below is really faster at ``ctx_low`` and the one above really faster at
``ctx_high``. Where the points next to the crossing tie, the bracket widens
to the nearest measured points on each side where that holds (ties only in
between; a point decided the other way stops it). Otherwise the crossing is
a *tie within noise* (±``noise_pct`` %, how far the undecided intervals reach
from 1), which says no rule. Two arms running the same program (the caller's
:data:`~traceattr.analysis.verdicts.SameProgram`) never cross. Each side is
judged by a :data:`Judge`: per-call samples, or a round's receipt rows.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import polars as pl

from traceattr.analysis.stats import Comparison
from traceattr.analysis.verdicts import SameProgram, Samples, call_samples, compare_arms, same_label
from traceattr.core.shapes import ShapeError, parse_shape

CROSSOVER_SCHEMA = {
    "family": pl.String,
    "faster_below": pl.String,
    "faster_above": pl.String,
    "ctx_low": pl.Int64,  # the measured ctx that bracket the crossing
    "ctx_high": pl.Int64,
    "crossover_ctx": pl.Int64,  # interpolated
    "decided": pl.Boolean,  # a rule (both sides really faster where measured), or a tie within noise
    # t(faster_above) / t(faster_below) at ctx_low (> 1 when decided) and at ctx_high (< 1), with intervals
    "ratio_at_low": pl.Float64,
    "ratio_at_low_lo": pl.Float64,
    "ratio_at_low_hi": pl.Float64,
    "ratio_at_high": pl.Float64,
    "ratio_at_high_lo": pl.Float64,
    "ratio_at_high_hi": pl.Float64,
    "noise_pct": pl.Float64,  # for a tie: how far the undecided intervals reach from 1, in %
}


def with_family(summary: pl.DataFrame) -> pl.DataFrame:
    """*summary* plus ``family`` (the shape with ctx left out) and ``ctx``."""
    rows = []
    for s in summary["shape"].unique().to_list():
        try:
            shape = parse_shape(s)
        except ShapeError:
            continue
        rows.append((s, shape.family, shape.ctx))
    info = pl.DataFrame(rows, schema={"shape": pl.String, "family": pl.String, "ctx": pl.Int64}, orient="row")
    return summary.join(info, on="shape", how="inner")


# (shape, below, above) -> t(above) / t(below) there, with its interval and verdict
Judge = Callable[[str, str, str], Comparison]


def sample_crossings(
    summary: pl.DataFrame,
    calls: pl.DataFrame,
    same_program: SameProgram = same_label,
    time: str = "gpu_span_ns",
    samples: Samples | None = None,
) -> Callable[[str, str, str], list[dict]]:
    """(family, a, b) -> every crossing of arms *a* and *b* along the family's ctx, judged on per-call samples
    of *calls* (computed when first asked, then kept); *samples*: those samples, where made already."""
    if samples is None:
        filled = pl.col("shape").fill_null(pl.col("series")), pl.col("backend").fill_null(pl.col("series"))
        samples = call_samples(calls.with_columns(filled), time)
    return judged_crossings(summary, lambda shape, a, b: compare_arms(samples, shape, a, b), same_program)


def judged_crossings(
    summary: pl.DataFrame, judge: Judge, same_program: SameProgram = same_label
) -> Callable[[str, str, str], list[dict]]:
    """(family, a, b) -> every crossing of *a* and *b* along the family's ctx of *summary*'s medians, each side
    judged by *judge* (per-call samples, or a round's receipt rows); computed when first asked, then kept."""
    fam = with_family(summary)
    memo: dict[tuple[str, str, str], list[dict]] = {}

    def found(family: str, a: str, b: str) -> list[dict]:
        a, b = sorted((a, b))
        key = (family, a, b)
        if key not in memo:
            part = fam.filter(pl.col("family") == family)
            memo[key] = _pair_crossings(judge, part, family, a, b, same_program)
        return memo[key]

    return found


def _pair_crossings(
    judge: Judge, part: pl.DataFrame, family: str, a: str, b: str, same_program: SameProgram
) -> list[dict]:
    """Each sign change of log(t_a / t_b) along *part*'s ctx, interpolated, judged and (where the points next to
    it tie) widened to the nearest decided points; one row per bracket (medians flip-flopping inside one tie
    zone make one)."""
    ta = part.filter(pl.col("backend") == a).select("ctx", "shape", pl.col("median_us").alias("ta"))
    tb = part.filter(pl.col("backend") == b).select("ctx", pl.col("median_us").alias("tb"))
    both = ta.join(tb, on="ctx").sort("ctx")
    pts = [(c, s, math.log(x / y)) for c, s, x, y in both.iter_rows() if x and y and x > 0 and y > 0]
    out, seen = [], set()
    for k, ((c0, s0, d0), (c1, s1, d1)) in enumerate(itertools.pairwise(pts)):
        if d0 == 0 or (d0 < 0) == (d1 < 0) or same_program(a, b, s0) or same_program(a, b, s1):
            continue
        below, above = (a, b) if d0 < 0 else (b, a)
        frac = d0 / (d0 - d1)  # interpolate in log(ctx) where log(ta/tb) crosses zero
        cross = math.exp(math.log(c0) + frac * (math.log(c1) - math.log(c0)))
        judged, lo, hi = _judge(judge, s0, s1, below, above), k, k + 1
        if not judged[0]:  # tied next to the crossing: are both sides decided further out?
            wide = _widen(judge, pts, k, below, above, lambda _i, _who: True)
            if wide is not None:
                lo, hi = wide
                judged = _judge(judge, pts[lo][1], pts[hi][1], below, above)
        key = (below, above, pts[lo][0], pts[hi][0])
        if key not in seen:
            seen.add(key)
            names = ("decided", "ratio_at_low", "ratio_at_low_lo", "ratio_at_low_hi", "ratio_at_high",
                     "ratio_at_high_lo", "ratio_at_high_hi", "noise_pct")  # fmt: skip
            out.append({"family": family, "faster_below": below, "faster_above": above, "ctx_low": pts[lo][0],
                        "ctx_high": pts[hi][0], "crossover_ctx": round(cross), **dict(zip(names, judged, strict=True))})  # fmt: skip
    return out


def _widen(
    judge: Judge, pts: list[tuple[int, str, float]], k: int, below: str, above: str, ok: Callable[[int, str], bool]
) -> tuple[int, int] | None:
    """The nearest measured points around the crossing between ``pts[k]`` and ``pts[k + 1]`` where *below*
    is really faster (left) and *above* really faster (right), with only undecided points between, or None.

    A rule needs the interval to exclude 1 at the measured points on both sides; where the points next
    to the crossing tie, the bracket widens to the nearest decided points. Medians flip-flopping inside
    the tie zone do not stop it (they are noise); a point decided the other way does.
    """
    opposite = {"slower": "faster", "faster": "slower"}

    def nearest(indices: range, who: str, verdict: str) -> int | None:
        for idx in indices:
            got = judge(pts[idx][1], below, above).verdict
            if got == opposite[verdict]:
                return None  # decided the other way first: not this crossing's bracket
            if got == verdict and ok(idx, who):
                return idx
        return None

    i = nearest(range(k, -1, -1), below, "slower")
    j = nearest(range(k + 1, len(pts)), above, "faster")
    return (i, j) if i is not None and j is not None else None


def _judge(judge: Judge, s0: str, s1: str, below: str, above: str) -> tuple:
    """(decided, the two ratios above/below with their intervals, noise %) of one crossing."""
    lo = judge(s0, below, above)  # above vs below where below should win: "slower"
    hi = judge(s1, below, above)  # ... and where above should win: "faster"
    decided = lo.verdict == "slower" and hi.verdict == "faster"
    undecided = [c.noise for c, want in ((lo, "slower"), (hi, "faster")) if c.verdict != want]
    noise = None if decided else 100 * max(undecided)
    return (decided, lo.ratio, lo.low, lo.high, hi.ratio, hi.low, hi.high, noise)
