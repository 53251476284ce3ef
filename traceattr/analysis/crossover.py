"""Where the winner changes along the context axis: decision rules from a sweep.

Shapes that differ only in ctx form a family (q, heads, batch, page, dtype,
pattern alike). Along each family's ctx axis, two backends cross where their
median times are equal; the crossing is interpolated log-linearly between
the two measured ctx points that bracket the sign change of log(t_a / t_b).
By default only crossings where the *fastest* backend changes are kept: those
are the decision rules ("above ~240k ctx at q=8 use FlashMLA"); ``every=True``
keeps the crossings of every pair.
"""

from __future__ import annotations

import itertools
import math

import polars as pl

from traceattr.shapes import ShapeError, parse_shape


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


def crossovers(summary: pl.DataFrame, *, every: bool = False) -> pl.DataFrame:
    """``family, faster_below, faster_above, ctx_low, ctx_high, crossover_ctx`` per crossing."""
    fam = with_family(summary)
    best = (
        fam.sort("median_us").group_by("family", "ctx").first().select("family", "ctx", pl.col("backend").alias("best"))
    )
    winner = {(f, c): b for f, c, b in best.iter_rows()}
    out = []
    for (family,), part in fam.group_by(["family"]):
        backends = sorted(part["backend"].unique().to_list())
        for i, a in enumerate(backends):
            for b in backends[i + 1 :]:
                ta = part.filter(pl.col("backend") == a).select("ctx", pl.col("median_us").alias("ta"))
                tb = part.filter(pl.col("backend") == b).select("ctx", pl.col("median_us").alias("tb"))
                both = ta.join(tb, on="ctx").sort("ctx")
                pts = [(c, math.log(x / y)) for c, x, y in both.iter_rows() if x > 0 and y > 0]
                for (c0, d0), (c1, d1) in itertools.pairwise(pts):
                    if d0 == 0 or (d0 < 0) == (d1 < 0):
                        continue
                    # interpolate in log(ctx) where log(ta/tb) crosses zero
                    frac = d0 / (d0 - d1)
                    cross = math.exp(math.log(c0) + frac * (math.log(c1) - math.log(c0)))
                    below, above = (a, b) if d0 < 0 else (b, a)
                    if every or (winner[(family, c0)] == below and winner[(family, c1)] == above):
                        out.append((family, below, above, c0, c1, round(cross)))
    return pl.DataFrame(
        out,
        schema={"family": pl.String, "faster_below": pl.String, "faster_above": pl.String,
                "ctx_low": pl.Int64, "ctx_high": pl.Int64, "crossover_ctx": pl.Int64},
        orient="row",
    ).sort("family", "crossover_ctx")  # fmt: skip
