"""Is one arm really faster than another? The ratio of medians with a confidence interval.

Every winner, crossover and round verdict traceattr prints goes through
:func:`compare_samples`, so "faster" means the same thing everywhere: the
percentile-bootstrap interval (scipy) of median(candidate) / median(baseline)
lies entirely below 1. The classes follow nvbench's robust comparison:

* ``same`` — the whole interval lies within ±``same_within`` of 1: any
  difference is too small to matter (this wins over faster/slower, so an
  A/A comparison or a sub-1% edge never makes a rule);
* ``faster`` / ``slower`` — otherwise, the interval excludes 1 (candidate vs baseline): the
  difference is real, and not provably negligible (part of the interval lies beyond the tolerance,
  or "same" would have won). This is the one rule of every winner, tie, crossover rule, sweep side
  and round verdict (:func:`classify`); README and ``--help`` state it so. Intervals are printed
  with enough digits that a bound near 1 shows on its side (``1.004``, never a rounded ``1.00``);
* ``ambiguous`` — the interval straddles 1 but is wider than the tolerance:
  more samples are needed to say anything.

Medians are the headline everywhere else, so the interval is for the ratio
of medians, not of means; resampling is seeded, so a verdict is reproducible.
Unpaired samples draw each resample's median from its order statistics
(:func:`bootstrap_medians`: the same bootstrap law, O(1) per resample, not
O(calls)); paired and grouped ones resample the pairs (scipy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from traceattr.core.precision import CONFIDENCE
from traceattr.core.protocol import SAME_WITHIN  # the gates' default, written once

Verdict = Literal["faster", "slower", "same", "ambiguous"]
VERDICTS: tuple[Verdict, ...] = ("faster", "slower", "same", "ambiguous")
_RESAMPLES = 2000
_SEED = 0
_BATCH_VALUES = 20_000_000  # resampled values held at once (~160 MB): bounds memory on traces with many calls


@dataclass(frozen=True)
class Comparison:
    """candidate vs baseline: ``ratio`` = median(candidate) / median(baseline), interval ``[low, high]``."""

    ratio: float
    low: float
    high: float
    verdict: Verdict
    n_baseline: int
    n_candidate: int
    confidence: float
    baseline: float = math.nan  # the medians whose ratio is ``ratio`` (grouped: median of per-group medians)
    candidate: float = math.nan

    @property
    def half_width(self) -> float:
        """Half the interval's width, as a fraction of 1 (the "±x%" of a tie)."""
        return (self.high - self.low) / 2 if math.isfinite(self.high - self.low) else math.nan

    @property
    def noise(self) -> float:
        """How far from 1 the interval reaches, as a fraction (the "±x%" of a tie within noise)."""
        return max(1 - self.low, self.high - 1, 0.0) if math.isfinite(self.high - self.low) else math.nan

    @property
    def decided(self) -> bool:
        """Whether one side is really faster (:func:`classify`: the interval excludes 1 and is not all within the tolerance)."""
        return self.verdict in ("faster", "slower")


def _ratio_of_medians(baseline: np.ndarray, candidate: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(candidate, axis=axis) / np.median(baseline, axis=axis)


def compare_samples(
    baseline: Sequence[float] | np.ndarray,
    candidate: Sequence[float] | np.ndarray,
    *,
    confidence: float = CONFIDENCE,
    same_within: float = SAME_WITHIN,
    paired: bool = False,
    groups: Sequence[int] | np.ndarray | None = None,
    slots: Sequence[int] | np.ndarray | None = None,
    n_resamples: int = _RESAMPLES,
    seed: int = _SEED,
) -> Comparison:
    """Compare per-call times (any unit, both the same) of *candidate* against *baseline*.

    ``paired`` resamples (baseline[i], candidate[i]) together, for samples that
    were taken side by side (one pair per round). Fewer than two positive
    samples on a side give ``ambiguous`` with a NaN interval.

    ``groups`` (paired samples only) labels each pair with its capture (a
    round of ``traceattr round``): each arm is then the median over groups of
    its per-group medians, as a round receipt reports it (``baseline`` and
    ``candidate`` hold the two medians, ``ratio`` their ratio: headline and
    interval come from the same pairs), and the interval is for that ratio
    (pairs resampled with their labels).

    ``slots`` (with ``groups``) labels each pair with its group's arm order
    (a round's captures alternate which arm is prepared and listed first):
    each arm is then the geometric mean over slots of its median over that
    slot's groups, so each order weighs the same however many captures it
    had. On the H200 the arm listed first in a capture ran up to 2% faster
    at 24 µs shapes (an A/A round read 1.015 "slower" from 3 captures, two
    of one order); the alternation balances that only when both orders
    count alike.
    """
    if groups is not None:
        return _compare_grouped(baseline, candidate, groups, slots, confidence, same_within, n_resamples, seed)
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    b, c = b[np.isfinite(b)], c[np.isfinite(c)]
    if len(b) < 2 or len(c) < 2 or np.median(b) <= 0 or np.median(c) <= 0:
        ratio = float(np.median(c) / np.median(b)) if len(b) and len(c) and np.median(b) > 0 else math.nan
        return Comparison(ratio, math.nan, math.nan, "ambiguous", len(b), len(c), confidence)
    if paired and len(b) != len(c):
        raise ValueError(f"paired samples need equal lengths, got {len(b)} and {len(c)}")
    ratio = float(_ratio_of_medians(b, c))
    if np.ptp(b) == 0 and np.ptp(c) == 0:
        low = high = ratio  # no spread at all: resampling cannot move the medians
    elif not paired:
        low, high = _unpaired_interval(b, c, confidence, n_resamples, seed)
    else:
        from scipy import stats  # paired samples only: importing scipy.stats takes seconds (compare needs none)

        res = stats.bootstrap(
            (b, c),
            _ratio_of_medians,
            vectorized=True,
            paired=paired,
            n_resamples=n_resamples,
            confidence_level=confidence,
            method="percentile",
            batch=max(1, _BATCH_VALUES // max(len(b), len(c))),
            rng=np.random.default_rng(seed),
        )
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return Comparison(ratio, low, high, classify(low, high, same_within), len(b), len(c), confidence)


def _unpaired_interval(
    b: np.ndarray, c: np.ndarray, confidence: float, n_resamples: int, seed: int
) -> tuple[float, float]:
    """The percentile-bootstrap interval of median(c) / median(b), each side resampled on its own.

    The same bootstrap distribution as resampling every call (``scipy.stats.bootstrap``, which this
    replaced: 61% of ``compare``'s time on a 1.25 M-kernel sweep), drawn in O(1) per resample:
    only a resample's middle order statistics matter (:func:`bootstrap_medians`)."""
    rng = np.random.default_rng(seed)
    theta = bootstrap_medians(np.sort(c), n_resamples, rng) / bootstrap_medians(np.sort(b), n_resamples, rng)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(theta, [alpha, 1 - alpha])  # scipy's percentile method: the same linear quantiles
    return float(low), float(high)


def bootstrap_medians(ordered: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """The medians of *n_resamples* bootstrap resamples of the sorted sample *ordered*, without drawing them.

    A resample is n indices ``floor(n·U)`` of n uniforms U; *ordered* being sorted, its k-th smallest
    value is ``ordered[floor(n·U₍ₖ₎)]``, and the k-th of n uniforms is Beta(k, n−k+1). The even-n median
    also needs the (k+1)-th: given U₍ₖ₎ = u the other n−k uniforms are uniform on (u, 1), so it is u plus
    (1−u) times the least of n−k uniforms, Beta(1, n−k). Exact in distribution, O(1) per resample."""
    n = len(ordered)
    k = (n + 1) // 2  # the (lower) middle rank, 1-based
    u = rng.beta(k, n - k + 1, n_resamples)
    low = ordered[np.minimum((n * u).astype(np.int64), n - 1)]
    if n % 2:
        return low
    u_next = u + (1 - u) * rng.beta(1, n - k, n_resamples)
    return (low + ordered[np.minimum((n * u_next).astype(np.int64), n - 1)]) / 2


def _group_medians(
    b: np.ndarray, c: np.ndarray, g: np.ndarray, axis: int = -1, slot_of: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Each side's median over groups of its per-group medians; along *axis* (one row per resample).

    *slot_of* (the slot of each group index ``0 … k-1``): the median is taken per slot, then the
    geometric mean over the slots present."""
    keys = np.unique(g)
    # a group absent from a resample is a NaN the outer median skips
    per_b = np.stack([_nanmedian(np.where(g == k, b, np.nan), axis) for k in keys])
    per_c = np.stack([_nanmedian(np.where(g == k, c, np.nan), axis) for k in keys])
    if slot_of is None:
        return _nanmedian(per_b, 0), _nanmedian(per_c, 0)
    slot_keys = slot_of[keys]
    slots = np.unique(slot_keys)
    by_b = np.stack([_nanmedian(per_b[slot_keys == s], 0) for s in slots])
    by_c = np.stack([_nanmedian(per_c[slot_keys == s], 0) for s in slots])
    # a slot absent from a resample (all its pairs drawn out) is skipped, like a group
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.exp(np.nanmean(np.log(by_b), 0)), np.exp(np.nanmean(np.log(by_c), 0))


def _nanmedian(x: np.ndarray, axis: int) -> np.ndarray:
    """``np.nanmedian(x, axis)``, the same numbers, by one sort (NaN sorts last) instead of numpy's masked
    arrays, which took 40 of 70 s of a 27-row round's CPU time (benchmarks/bench_round.py)."""
    s = np.sort(np.moveaxis(x, axis, -1), axis=-1)
    n = np.sum(~np.isnan(s), axis=-1)
    lo = np.take_along_axis(s, np.maximum((n - 1) // 2, 0)[..., None], -1)[..., 0]
    hi = np.take_along_axis(s, np.maximum(n // 2, 0)[..., None], -1)[..., 0]
    return np.where(n > 0, (lo + hi) / 2, np.nan)


def _ratio_of_group_medians(
    b: np.ndarray, c: np.ndarray, g: np.ndarray, axis: int = -1, slot_of: np.ndarray | None = None
) -> np.ndarray:
    """median over groups of per-group medians, candidate over baseline (the statistic the bootstrap resamples)."""
    mb, mc = _group_medians(b, c, g, axis, slot_of)
    return mc / mb


def _compare_grouped(
    baseline: Sequence[float] | np.ndarray,
    candidate: Sequence[float] | np.ndarray,
    groups: Sequence[int] | np.ndarray,
    slots: Sequence[int] | np.ndarray | None,
    confidence: float,
    same_within: float,
    n_resamples: int,
    seed: int,
) -> Comparison:
    b, c = np.asarray(baseline, dtype=float), np.asarray(candidate, dtype=float)
    _, first, g = np.unique(np.asarray(groups), return_index=True, return_inverse=True)
    if not len(b) == len(c) == len(g) or (slots is not None and len(slots) != len(g)):
        sizes = f"{len(b)}, {len(c)}, {len(g)}" + ("" if slots is None else f" and {len(slots)} slots")
        raise ValueError(f"grouped pairs need equal lengths, got {sizes}")
    # one slot per group, its first pair's: the statistic looks it up by group index
    slot_of = None if slots is None else np.asarray(slots, dtype=np.int64)[first]
    keep = np.isfinite(b) & np.isfinite(c)
    b, c, g = b[keep], c[keep], g[keep]
    mb, mc = (float(m) for m in _group_medians(b, c, g, slot_of=slot_of)) if len(b) else (math.nan, math.nan)
    if len(b) < 2 or np.median(b) <= 0 or np.median(c) <= 0:
        ratio = mc / mb if len(b) and np.median(b) > 0 else math.nan
        return Comparison(ratio, math.nan, math.nan, "ambiguous", len(b), len(c), confidence, mb, mc)
    ratio = mc / mb
    if np.ptp(b) == 0 and np.ptp(c) == 0:
        low = high = ratio
    else:
        from scipy import stats

        res = stats.bootstrap(
            (b, c, g),
            lambda b, c, g, axis=-1: _ratio_of_group_medians(b, c, g, axis, slot_of),
            vectorized=True,
            paired=True,
            batch=max(1, _BATCH_VALUES // (3 * len(b))),
            n_resamples=n_resamples,
            confidence_level=confidence,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return Comparison(ratio, low, high, classify(low, high, same_within), len(b), len(c), confidence, mb, mc)


def classify(low: float, high: float, same_within: float = SAME_WITHIN) -> Verdict:
    """The verdict an interval ``[low, high]`` of candidate/baseline implies (see module doc)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "ambiguous"
    if low >= 1 - same_within and high <= 1 + same_within:
        return "same"
    if high < 1:
        return "faster"
    if low > 1:
        return "slower"
    return "ambiguous"


def geomean(values: Sequence[float] | np.ndarray) -> float:
    """Geometric mean of positive ratios (NaN when there are none)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    return float(np.exp(np.mean(np.log(v)))) if len(v) else math.nan  # scipy.stats.gmean's formula
