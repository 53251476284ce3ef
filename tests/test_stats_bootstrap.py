"""The order-statistic bootstrap of :mod:`traceattr.analysis.stats` against the resampling it replaced.

``compare_samples`` once resampled every call (``scipy.stats.bootstrap``); it now draws each
resample's median from its order statistics. Both estimate one bootstrap distribution, so on every
shipped example and fixture the verdicts must agree and the intervals differ by no more than the
Monte-Carlo error of 2,000 resamples.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats

from tests.helpers import FIXTURES
from traceattr.analysis.calls import calls as call_table
from traceattr.analysis.stats import _ratio_of_medians, bootstrap_medians, classify, compare_samples
from traceattr.session import Session

EXAMPLES = sorted((Path(__file__).parents[1] / "examples" / "traces").glob("*.sqlite"))


def _scipy_interval(b: np.ndarray, c: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """The interval as traceattr computed it before (scipy's percentile bootstrap over every call)."""
    res = stats.bootstrap(
        (b, c), _ratio_of_medians, vectorized=True, n_resamples=2000, confidence_level=0.95,
        method="percentile", rng=np.random.default_rng(seed),
    )  # fmt: skip
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


@pytest.mark.parametrize("n", [1, 2, 7, 40, 301])
def test_resampled_medians_follow_the_exact_bootstrap_law(n: int) -> None:
    # odd n: a resample's median is ordered[j] or below iff at least k = (n+1)/2 draws fall at or below j,
    # a Binomial(n, (j+1)/n) count: the law the draws must follow, exactly
    ordered = np.arange(n, dtype=float) if n % 2 else np.arange(n + 1, dtype=float)
    n = len(ordered)
    draws = bootstrap_medians(ordered, 40_000, np.random.default_rng(3))
    j = np.arange(n)
    exact = stats.binom.sf((n + 1) // 2 - 1, n, (j + 1) / n)
    seen = np.searchsorted(np.sort(draws), ordered, side="right") / len(draws)
    assert np.max(np.abs(seen - exact)) < 0.012  # ≈ 5 standard errors of an empirical CDF of 40 k draws


@pytest.mark.parametrize("n", [2, 6, 50, 200])
def test_even_medians_match_brute_force_resampling(n: int) -> None:
    rng = np.random.default_rng(n)
    ordered = np.sort(rng.lognormal(0, 0.4, n))
    draws = bootstrap_medians(ordered, 20_000, np.random.default_rng(1))
    brute = np.median(ordered[rng.integers(0, n, (20_000, n))], axis=1)
    assert stats.ks_2samp(draws, brute).statistic < 0.025  # two samples of 20 k: ≈ 1.8× the 1% critical value


def _pairs(trace: Path) -> list[tuple[np.ndarray, np.ndarray]]:
    """(baseline, candidate) per-call spans of two backends measured at one shape (at most 12 per trace); in a
    trace whose names give no backend and shape, its two series with the most calls."""
    calls = call_table(Session(trace).attribute()).filter(pl.col("gpu_span_ns").is_not_null())
    named = calls.filter(pl.col("shape").is_not_null() & pl.col("backend").is_not_null())
    per = named.group_by("shape", "backend").agg(pl.col("gpu_span_ns").cast(pl.Float64)).sort("shape", "backend")
    by_shape: dict[str, list[np.ndarray]] = {}
    for shape, _backend, v in per.iter_rows():
        by_shape.setdefault(shape, []).append(np.asarray(v))
    pairs = [(arms[0], other) for arms in by_shape.values() for other in arms[1:]][:12]
    if pairs:
        return pairs
    series = calls.group_by("series").agg(pl.col("gpu_span_ns").cast(pl.Float64), pl.len()).sort("len", "series")
    two = [np.asarray(v) for v in series.tail(2)["gpu_span_ns"]]
    return [(two[0], two[1])] if len(two) == 2 else []


def _agree(b: np.ndarray, c: np.ndarray) -> None:
    new = compare_samples(b, c)
    if not np.isfinite(new.low):
        assert new.verdict == "ambiguous"
        return
    old_low, old_high = _scipy_interval(b, c)
    # Monte-Carlo error of a 2,000-resample percentile: the bootstrap law's quantiles a few standard errors of
    # the percentile's level either side (an atom of a discrete law, few distinct times, gives no room)
    rng = np.random.default_rng(99)
    law = bootstrap_medians(np.sort(c), 400_000, rng) / bootstrap_medians(np.sort(b), 400_000, rng)
    se = np.sqrt(2 * 0.025 * 0.975 / 2000)  # of the difference of two independent estimates
    for old_bound, new_bound, p in ((old_low, new.low, 0.025), (old_high, new.high, 0.975)):
        lo, hi = np.quantile(law, [max(p - 5 * se, 0), min(p + 5 * se, 1)])
        assert lo - 1e-12 <= old_bound <= hi + 1e-12 and lo - 1e-12 <= new_bound <= hi + 1e-12, (old_bound, lo, hi)
    assert new.verdict == classify(old_low, old_high)


@pytest.mark.slow
@pytest.mark.parametrize("trace", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_examples_keep_their_intervals_and_verdicts(trace: Path) -> None:
    pairs = _pairs(trace)
    assert pairs, f"{trace.name}: no shape with two backends"
    for b, c in pairs:
        _agree(b, c)


@pytest.mark.slow
@pytest.mark.parametrize("name", FIXTURES)
def test_fixtures_keep_their_intervals_and_verdicts(exports: dict[str, Path], name: str) -> None:
    pairs = _pairs(exports[name])
    if not pairs:
        pytest.skip(f"{name}: fewer than two call series, nothing is compared")
    for b, c in pairs:
        _agree(b, c)
