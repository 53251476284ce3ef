"""Verdicts of compare_samples on constructed samples with known answers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats

from tests.helpers import FIXTURES
from traceattr.analysis.calls import calls as call_table
from traceattr.analysis.stats import _ratio_of_medians, bootstrap_medians, classify, compare_samples, geomean
from traceattr.session import Session

rng = np.random.default_rng(7)
BASE = 100 + rng.normal(0, 0.5, 30)  # ~0.5% noise around 100 µs


def test_clearly_faster_and_slower():
    fast = compare_samples(BASE, BASE * 0.9)
    assert fast.verdict == "faster" and fast.high < 1 and fast.ratio == pytest.approx(0.9, rel=1e-3)
    slow = compare_samples(BASE, BASE * 1.1)
    assert slow.verdict == "slower" and slow.low > 1


def test_a_a_is_same():
    other = 100 + np.random.default_rng(8).normal(0, 0.5, 30)
    cmp = compare_samples(BASE, other)
    assert cmp.verdict == "same" and cmp.low < 1.01 and cmp.high > 0.99


def test_sub_tolerance_edge_is_same_not_a_winner():
    cmp = compare_samples(BASE, BASE * 0.996)  # a real but 0.4% difference
    assert cmp.high < 1  # the interval does exclude 1 ...
    assert cmp.verdict == "same"  # ... but by less than the tolerance


def test_noisy_overlap_is_ambiguous():
    noisy = 100 + np.random.default_rng(9).normal(0, 15, 6)
    cmp = compare_samples(BASE, noisy)
    assert cmp.verdict == "ambiguous" and cmp.low < 1 < cmp.high


def test_too_few_samples_and_degenerate():
    assert compare_samples([100.0], [90.0]).verdict == "ambiguous"
    same = compare_samples([100.0, 100.0, 100.0], [100.0, 100.0])
    assert (same.low, same.high, same.verdict) == (1.0, 1.0, "same")
    assert compare_samples([100.0, 100.0], [80.0, 80.0]).verdict == "faster"


def test_paired_needs_equal_lengths():
    with pytest.raises(ValueError):
        compare_samples([1.0, 2.0], [1.0, 2.0, 3.0], paired=True)
    assert compare_samples(BASE, BASE * 1.05, paired=True).verdict == "slower"


def test_classify_and_geomean():
    assert classify(0.995, 1.004) == "same"
    assert classify(0.90, 0.98) == "faster"
    assert classify(1.02, 1.05) == "slower"
    assert classify(0.97, 1.03) == "ambiguous"
    assert classify(math.nan, 1.0) == "ambiguous"
    assert geomean([0.5, 2.0]) == pytest.approx(1.0)
    assert math.isnan(geomean([]))


def test_grouped_pairs_give_the_median_of_group_medians_and_its_interval():
    # three captures, the second 3% slower for both arms (a clock step): the receipt's statistic is the
    # median over captures of each capture's median, and the interval must be about that same number
    rng = np.random.default_rng(4)
    g = np.repeat([0, 1, 2], 20)
    b = 100 * (1 + 0.02 * rng.standard_normal(60)) * np.where(g == 1, 1.03, 1.0)
    c = b * 0.94 * (1 + 0.02 * rng.standard_normal(60))
    cmp = compare_samples(b, c, paired=True, groups=g)
    headline = np.median([np.median(c[g == k]) for k in range(3)]) / np.median([np.median(b[g == k]) for k in range(3)])
    assert cmp.ratio == pytest.approx(headline) and cmp.low < cmp.ratio < cmp.high < 1 and cmp.verdict == "faster"
    aa = compare_samples(b, b * (1 + 0.001 * rng.standard_normal(60)), paired=True, groups=g)
    assert aa.verdict == "same"
    with pytest.raises(ValueError):
        compare_samples(b, c, paired=True, groups=g[:-1])


# -- the runner's stopping rule: how precise is a median --------------------------------------


# -- The order-statistic bootstrap of :mod:`traceattr.analysis.stats` against the resampling it replaced.
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
