"""traceattr.core.precision: the distribution-free interval of a median and its noise."""

from __future__ import annotations

import math

import numpy as np
import pytest

from traceattr.core.precision import median_interval, median_noise


def test_median_interval_covers_the_true_median_and_shrinks_with_samples() -> None:
    rng = np.random.default_rng(3)
    true = float(np.log(2))  # median of the unit exponential: skewed like kernel times
    bounds = np.array([median_interval(row) for row in rng.exponential(1.0, (2000, 60))])
    covered = np.mean((bounds[:, 0] <= true) & (true <= bounds[:, 1]))
    assert 0.945 <= covered <= 0.972  # 96% exactly at n = 60 (ranks are whole); one rank off either way fails
    wide = np.median([median_noise(rng.normal(100, 2, 40)) for _ in range(200)])
    narrow = np.median([median_noise(rng.normal(100, 2, 400)) for _ in range(200)])
    assert narrow < wide / 2.5  # ~1/sqrt(n): ten times the samples, ~3.2 times narrower


def test_median_noise_needs_enough_samples_and_is_scale_free() -> None:
    assert np.isnan(median_noise([1.0, 2.0, 3.0])) and np.isnan(median_noise([]))
    x = np.random.default_rng(0).normal(50, 1, 100)
    assert median_noise(x) == pytest.approx(median_noise(10 * x))
    assert median_noise([*x, math.nan, math.inf]) == median_noise(x)  # the median and its interval skip the same
    assert median_noise(np.full(50, 7.0)) == 0.0


def test_median_interval_is_two_order_statistics() -> None:
    # 95%: with 10 samples the binomial puts the bounds at the 2nd and 9th smallest; 6 is the fewest that
    # give an interval at all (the extremes), 5 give none
    assert median_interval(np.arange(10.0)[::-1]) == (1.0, 8.0)
    assert median_interval([6.0, 1.0, 5.0, 2.0, 4.0, 3.0]) == (1.0, 6.0)
    assert all(math.isnan(x) for x in median_interval([1.0, 2.0, 3.0, 4.0, 5.0]))
    assert median_interval([*range(10), math.nan, math.inf]) == (1.0, 8.0)  # non-finite samples are left out
    assert median_interval(np.arange(10.0), confidence=0.5)[0] > 1.0  # less confidence: a narrower interval
