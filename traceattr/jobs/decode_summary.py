"""The receipt math of a decode trajectory: totals with bootstrap intervals, gain, regret, switches.

Inputs are plain numbers (GPU µs per contender, step and iteration from
:class:`traceattr.runtime.measure.TrajectoryTimes`), so every figure is tested on a CPU.

* A contender's **total** is the sum over steps of its median over iterations: the GPU time of one pass
  over the trajectory.
* The **oracle** is, at each step, the fastest fixed arm's median (same capture); its total is what
  a dispatcher that always chose right would take. Choosing the minimum of noisy medians biases it
  low, so a perfect dispatcher shows a small positive regret.
* **gain** = 1 − dispatcher / best fixed arm (best = lowest total); **regret** = dispatcher / oracle − 1.
* Intervals (95%): percentile bootstrap over iterations (``scipy.stats.bootstrap``), a resample drawing
  whole iterations (every contender and step of iteration r together), so the contenders stay paired.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from traceattr.runtime.table import FamilyKey, FamilyTable, Segment

CONFIDENCE = 0.95
RESAMPLES = 2000


@dataclass(frozen=True)
class Interval:
    value: float
    lo: float
    hi: float


@dataclass(frozen=True)
class TrajectorySummary:
    fixed: tuple[str, ...]
    dispatcher: str
    ctx: tuple[int, ...]  # key ctx per step
    totals: Mapping[str, Interval]  # µs, per contender
    oracle: Interval  # µs
    best_fixed: str
    gain: Interval  # 1 - dispatcher / best fixed
    gain_vs: Mapping[str, Interval]  # 1 - dispatcher / that fixed arm, per fixed arm
    regret: Interval  # dispatcher / oracle - 1
    modelled_regret: float  # Σ median of the fixed arm the dispatcher chose / oracle − 1 (its choices alone)
    switches: int
    chosen: tuple[str, ...]
    fastest: tuple[str, ...]  # the oracle's arm per step
    medians: Mapping[str, tuple[float, ...]]  # µs per step
    right: int  # steps where the dispatcher chose the oracle's arm


def _cube(times: Mapping[str, Sequence[Sequence[float]]], labels: Sequence[str]) -> np.ndarray:
    """[contender, iteration, step] µs."""
    return np.array([np.asarray(times[label], dtype=float).T for label in labels])


def summarize(times: Mapping[str, Sequence[Sequence[float]]], fixed: Sequence[str], dispatcher: str,
              chosen: Sequence[str], ctx: Sequence[int], *, seed: int = 0) -> TrajectorySummary:  # fmt: skip
    """The summary of one trajectory (see the module doc). *times*: label -> [step][iteration] µs."""
    from scipy.stats import bootstrap

    labels = (*fixed, dispatcher)
    cube = _cube(times, labels)
    nf = len(fixed)
    if len(chosen) != cube.shape[2]:
        raise ValueError(f"{len(chosen)} choices for {cube.shape[2]} steps")

    def stats(c: np.ndarray) -> np.ndarray:
        med = np.median(c, axis=1)  # [contender, step]
        totals = med.sum(axis=1)
        oracle = med[:nf].min(axis=0).sum()
        best = totals[:nf].min()
        return np.array(
            [*totals, oracle, 1 - totals[nf] / best, totals[nf] / oracle - 1, *(1 - totals[nf] / totals[:nf])]
        )

    point = stats(cube)
    iters = cube.shape[1]
    if iters > 1:
        seeded = {_rng_name(bootstrap): np.random.default_rng(seed)}
        res = bootstrap((np.arange(iters),), lambda idx: stats(cube[:, idx.astype(int), :]), vectorized=False,
                        n_resamples=RESAMPLES, confidence_level=CONFIDENCE, method="percentile", **seeded)  # fmt: skip
        lo, hi = np.asarray(res.confidence_interval.low), np.asarray(res.confidence_interval.high)
    else:
        lo = hi = np.full_like(point, math.nan)
    iv = [Interval(float(p), float(a), float(b)) for p, a, b in zip(point, lo, hi, strict=True)]
    med = np.median(cube, axis=1)
    fastest_idx = med[:nf].argmin(axis=0)
    fastest = tuple(fixed[i] for i in fastest_idx)
    index = {label: i for i, label in enumerate(fixed)}
    unknown = sorted(set(chosen) - set(index))
    if unknown:
        raise ValueError(f"the dispatcher chose {', '.join(unknown)}, not among the fixed arms {', '.join(fixed)}")
    modelled = sum(med[index[a], s] for s, a in enumerate(chosen))
    totals = {label: iv[i] for i, label in enumerate(labels)}
    best_fixed = min(fixed, key=lambda label: totals[label].value)
    return TrajectorySummary(
        fixed=tuple(fixed), dispatcher=dispatcher, ctx=tuple(ctx), totals=totals, oracle=iv[nf + 1],
        best_fixed=best_fixed, gain=iv[nf + 2], regret=iv[nf + 3], gain_vs={a: iv[nf + 4 + i] for i, a in enumerate(fixed)}, modelled_regret=float(modelled / point[nf + 1] - 1),
        switches=sum(a != b for a, b in itertools.pairwise(chosen)), chosen=tuple(chosen),
        fastest=fastest, medians={label: tuple(float(x) for x in med[i]) for i, label in enumerate(labels)},
        right=sum(a == b for a, b in zip(chosen, fastest, strict=True)),
    )  # fmt: skip


def _rng_name(fn: object) -> str:
    """scipy ≥ 1.15 calls the generator ``rng``; older releases ``random_state``."""
    import inspect

    return "rng" if "rng" in inspect.signature(fn).parameters else "random_state"  # type: ignore[arg-type]


def derive_family(
    family: str, key: FamilyKey, ctx: Sequence[int], medians: Mapping[str, Sequence[float]]
) -> FamilyTable:
    """A table from a grid: the fastest arm (lowest median) at each measured ctx, a boundary at the geometric
    middle of two neighbouring points whose fastest arms differ; the ends extrapolate."""
    if not ctx:
        raise ValueError("a table needs at least one measured ctx")
    order = sorted(range(len(ctx)), key=lambda i: ctx[i])
    arms = list(medians)
    best = [min(arms, key=lambda a: medians[a][i]) for i in order]
    points = [ctx[i] for i in order]
    segments: list[Segment] = []
    lo: int | None = None
    for j in range(1, len(points)):
        if best[j] != best[j - 1]:
            cut = round(math.sqrt(points[j - 1] * points[j]))
            segments.append(Segment(lo, cut, best[j - 1]))
            lo = cut
    segments.append(Segment(lo, None, best[-1]))
    return FamilyTable(family, key, tuple(segments), tuple(points))
