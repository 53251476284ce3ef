"""A family's dispatch along ctx as segments: which backend from which ctx to which, built from measured points.

The one builder of segments (:func:`build_segments`) that the decision (:mod:`traceattr.analysis.decision`)
and the dispatch table's leave-one-out (:mod:`traceattr.analysis.dispatch_table`) both use, so a table and
its held-out predictions are made the same way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ShapePoint:
    """One measured ctx of a family: each backend's median and which backends tie with the fastest."""

    ctx: int
    shape: str
    median_us: Mapping[str, float]
    good: frozenset[str]  # the fastest, and every backend not really slower than it (tie, same program)

    @property
    def fastest(self) -> str:
        return min(self.median_us, key=lambda b: (self.median_us[b], b))

    def regret(self, backend: str | None) -> float | None:
        """t(backend) / t(fastest) − 1; None where *backend* was not measured here."""
        if backend is None or backend not in self.median_us:
            return None
        return self.median_us[backend] / self.median_us[self.fastest] - 1


@dataclass(frozen=True)
class Segment:
    ctx_from: int | None  # None: unbounded
    ctx_to: int | None
    backend: str
    measured: tuple[int, int] | None = None  # the measured ctx its lower breakpoint lies between
    decided: bool | None = None  # whether a 95% rule of the sweep's crossovers stands at that breakpoint


def lookup(segments: Sequence[Segment], ctx: float) -> str | None:
    """The backend *segments* choose at *ctx* (``ctx_from ≤ ctx < ctx_to``)."""
    for seg in segments:
        if (seg.ctx_from is None or ctx >= seg.ctx_from) and (seg.ctx_to is None or ctx < seg.ctx_to):
            return seg.backend
    return None


def build_segments(points: Sequence[ShapePoint]) -> list[Segment]:
    """The table of *points* (one family, any order): see the module doc."""
    pts = sorted(points, key=lambda p: p.ctx)
    choices: list[str] = []
    for i, p in enumerate(pts):
        if choices and choices[-1] in p.good:
            choices.append(choices[-1])
            continue
        # a switch (or the start): of the arms good here, the one that stays good the furthest, so the table
        # switches as rarely as the points allow; among those the fastest here
        good = sorted(p.good & set(p.median_us)) or [p.fastest]
        choices.append(min(good, key=lambda b: (-_good_run(pts, i, b), p.median_us[b], b)))
    segments: list[Segment] = []
    start: int | None = None
    measured: tuple[int, int] | None = None
    for i, (p, choice) in enumerate(zip(pts, choices, strict=True)):
        if i + 1 < len(pts) and choices[i + 1] != choice:
            q = pts[i + 1]
            cut = _crossing(p, q, choice, choices[i + 1])
            segments.append(Segment(start, cut, choice, measured))
            start, measured = cut, (p.ctx, q.ctx)
    if pts:
        segments.append(Segment(start, None, choices[-1], measured))
    return segments


def _good_run(pts: Sequence[ShapePoint], i: int, backend: str) -> int:
    """How many points from ``pts[i]`` on *backend* stays good at."""
    n = 0
    for p in pts[i:]:
        if backend not in p.good:
            break
        n += 1
    return n


def _crossing(p: ShapePoint, q: ShapePoint, a: str, b: str) -> int:
    """Where the medians of *a* and *b* cross between *p* and *q* (log-linear), else their geometric mean."""
    try:
        d0 = math.log(p.median_us[a] / p.median_us[b])
        d1 = math.log(q.median_us[a] / q.median_us[b])
    except (KeyError, ValueError, ZeroDivisionError):
        d0 = d1 = 0.0
    x0, x1 = math.log(p.ctx), math.log(q.ctx)
    if d0 < 0 < d1 or d1 < 0 < d0:  # a faster at p (d0 < 0) and slower at q, or the other way round
        return round(math.exp(x0 + d0 / (d0 - d1) * (x1 - x0)))
    return round(math.exp((x0 + x1) / 2))
