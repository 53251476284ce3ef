"""Verdicts of compare_samples on constructed samples with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from traceattr.analysis.stats import classify, compare_samples, geomean

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
