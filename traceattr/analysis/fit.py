"""Fixed cost vs per-token cost: time = a + b·ctx per backend and shape family, from a context sweep.

A decode call's time grows with the KV it reads (b, per cached token) on
top of what it pays regardless (a: launch, scheduling, the merge, the
tail of a short grid). Shapes that differ only in ctx form a family (q,
heads, batch, page, dtype alike); per (family, backend) measured at three
or more context lengths, ordinary least squares over every call
(``scipy.stats.linregress``'s formulas, in numpy: importing ``scipy.stats`` took
seconds of every ``compare``) gives a and b with ``confidence`` intervals
(Student t on their standard errors) and r². ``ctx_half`` = a / b is the
context at which the per-token part equals the fixed part: below it the
fixed cost dominates.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from traceattr.analysis.crossover import with_family

FIT_SCHEMA = {
    "family": pl.String, "backend": pl.String, "contexts": pl.Int64, "calls": pl.Int64,
    "fixed_us": pl.Float64, "fixed_low_us": pl.Float64, "fixed_high_us": pl.Float64,
    "per_1k_tokens_us": pl.Float64, "per_1k_low_us": pl.Float64, "per_1k_high_us": pl.Float64,
    "r2": pl.Float64, "ctx_half": pl.Float64,
}  # fmt: skip
MIN_CONTEXTS = 3  # two points always fit a line exactly: no interval, no check


def fit(calls: pl.DataFrame, *, confidence: float = 0.95, time: str = "gpu_span_ns") -> pl.DataFrame:
    """:data:`FIT_SCHEMA` rows for every (family, backend) of *calls* measured at ≥ 3 context lengths; *time*:
    the per-call time column (the chosen basis)."""
    # the three columns read, then filtered: a filter of the whole call table copies every column
    c = calls.select("shape", "backend", time).filter(
        pl.col("shape").is_not_null() & pl.col("backend").is_not_null() & pl.col(time).is_not_null()
    )
    if c.height == 0:
        return pl.DataFrame(schema=FIT_SCHEMA)
    fam = with_family(c.select("shape", "backend", (pl.col(time) / 1e3).alias("t_us")))
    out = []
    # one regression per (family, backend): a handful of groups, each fitted by scipy
    for (family, backend), part in fam.group_by(["family", "backend"], maintain_order=True):
        contexts = part["ctx"].n_unique()
        if contexts < MIN_CONTEXTS:
            continue
        x, y = part["ctx"].cast(pl.Float64).to_numpy(), part["t_us"].to_numpy()
        a, b, sa, sb, r = _least_squares(x, y)
        from scipy import special  # only where a line is fitted: its import takes ~0.35 s

        t = float(special.stdtrit(len(x) - 2, 0.5 + confidence / 2))  # Student t's quantile (stats.t.ppf)
        da, db = t * sa, t * sb
        out.append((family, backend, contexts, len(x), a, a - da, a + da, 1e3 * b, 1e3 * (b - db), 1e3 * (b + db),
                    r**2, a / b if a > 0 and b > 0 else None))  # fmt: skip
    return pl.DataFrame(out, schema=FIT_SCHEMA, orient="row").sort("family", "backend")


def _least_squares(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float, float]:
    """(intercept, slope, their standard errors, r) of y = a + b·x, as ``scipy.stats.linregress`` gives them."""
    xm, ym = x.mean(), y.mean()
    sxx, syy, sxy = np.mean((x - xm) ** 2), np.mean((y - ym) ** 2), np.mean((x - xm) * (y - ym))
    # no spread on one side: no correlation to speak of (NaN, and NaN errors, as scipy 1.17 says)
    r = math.nan if sxx == 0 or syy == 0 else float(np.clip(sxy / np.sqrt(sxx * syy), -1, 1))
    b = sxy / sxx
    sb = float(np.sqrt((1 - r**2) * syy / sxx / (len(x) - 2)))
    return float(ym - b * xm), float(b), sb * float(np.sqrt(sxx + xm**2)), sb, r
