"""A dispatch table a serving engine can load, and what it costs: breakpoints along ctx, regret, graph-safe choice.

Per shape family (the shape with ctx left out: heads, dtype, page, batch, q alike) the table says which
backend to run for each ctx interval. It is built from the measured points alone:

* at each measured ctx the choice is a *good* backend (the fastest, or one that ties with it: verdict
  ``winner``/``tie``); a backend chosen at the ctx before stays chosen while it is good (a switch
  inside a tie buys nothing and flip-flops on noise), and where a switch is needed the new choice is
  the good backend that stays good the furthest, so the table switches as rarely as the points allow;
* where the choice changes between two measured ctx, the breakpoint is where the two backends'
  medians cross, log(t_a / t_b) interpolated linearly in log ctx (:mod:`traceattr.analysis.crossover`'s
  interpolation); where their medians do not cross there, the geometric mean of the two ctx.
  ``decided`` says whether the sweep's crossovers hold a 95%-confidence rule there.

**Regret** of a choice at a shape: t(choice) / t(fastest) − 1, medians (0: the fastest was chosen).
For every measured shape, the table's regret (in-sample), the same for "always backend X" (every
backend measured at every ctx of the family: the baselines engines use), and **leave-one-out**: each
measured ctx predicted by the table built from the family's other points, so the regret says how far
the table can be trusted between (and, at the ends, beyond) measured points.

**Graph-safe choice**: an engine that captures one CUDA graph per batch/q bucket cannot switch
backend by ctx inside it. Per family, the one backend with the least expected time over a ctx
distribution (uniform in log ctx over the measured range by default, or a histogram of request
lengths: :func:`parse_histogram`), with its expected regret against the per-ctx table: what capturing
graphs for both backends and dispatching per batch by seq_len would buy. Times between measured ctx
interpolate log t linearly in log ctx; beyond them they extrapolate the outermost segment (the share
of the distribution out there is reported).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from traceattr.analysis.decision import Decision, decide, frame_crossings
from traceattr.analysis.segments import Segment, ShapePoint, build_segments, lookup
from traceattr.core.errors import TraceattrError
from traceattr.core.shapes import parse_shape

__all__ = ["Segment", "ShapePoint", "build_segments", "lookup"]  # built in analysis.segments, read from here too

_GRID = 64  # points per histogram bin (log-spaced) when integrating expected time


@dataclass(frozen=True)
class Regret:
    """Regret over a set of shapes: mean and max of t(choice) / t(fastest) − 1, and how many were right."""

    mean: float | None
    max: float | None
    shapes: int  # shapes with a measured choice
    right: int  # of those, where the choice was the fastest or tied with it
    unmeasured: int = 0  # shapes where the choice was not measured (no regret to compute)

    @classmethod
    def of(cls, pairs: Sequence[tuple[ShapePoint, str | None]]) -> Regret:
        values = [(p.regret(b), b in p.good) for p, b in pairs]
        known = [(v, ok) for v, ok in values if v is not None]
        regrets = [v for v, _ in known]
        return cls(
            float(np.mean(regrets)) if regrets else None,
            max(regrets) if regrets else None,
            len(known),
            sum(ok for _, ok in known),
            len(values) - len(known),
        )


@dataclass(frozen=True)
class Held:
    """One leave-one-out prediction: the table of the family's other points, at this point."""

    ctx: int
    shape: str
    predicted: str | None
    fastest: str
    regret: float | None
    right: bool  # the prediction is the fastest or tied with it here
    extrapolated: bool  # outside the other points' ctx range


@dataclass(frozen=True)
class GraphSafe:
    """The one backend per bucket (family) with the least expected time over the ctx distribution."""

    backend: str
    expected_us: float  # expected time per call of that backend
    per_ctx_us: float  # expected time of the per-ctx table
    expected_regret: float  # expected_us / per_ctx_us − 1
    max_regret: float  # the worst ctx of the distribution: t(backend) / t(table choice) − 1
    expected_us_by_backend: Mapping[str, float]
    outside_share: float  # the distribution's weight outside the measured ctx (extrapolated times)


@dataclass(frozen=True)
class FamilyTable:
    family: str
    key: Mapping[str, object]  # heads, kv_dtype, page, batch, q (and pattern, dcp, prefix)
    points: tuple[ShapePoint, ...]
    segments: tuple[Segment, ...]
    regret: Regret
    baselines: Mapping[str, Regret]  # "always X", for each backend measured at every ctx of the family
    loo: tuple[Held, ...]
    loo_regret: Regret
    graph_safe: GraphSafe | None


@dataclass(frozen=True)
class DispatchTable:
    families: tuple[FamilyTable, ...]
    regret: Regret  # over every measured shape of every family
    loo_regret: Regret
    distribution: str  # how the graph-safe choice weighs ctx
    notes: tuple[str, ...] = field(default=())


# -- ctx distributions -------------------------------------------------------------------

Bin = tuple[int, int, float]  # (low, high, weight): uniform in log ctx over [low, high]; low == high: one ctx


def parse_histogram(text: str, where: str) -> tuple[Bin, ...]:
    """Request lengths, one bin a line: ``ctx weight`` (that ctx) or ``low high weight`` (uniform in log ctx).

    Numbers separated by commas or blanks, ctx as integers or with k/m (``131k``), weights ≥ 0 (counts
    or shares, normalised); ``#`` starts a comment; a first line of words is a header. Errors name
    *where* and the line.
    """
    bins: list[Bin] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = [x for x in re.split(r"[,\s]+", line) if x]
        if not bins and all(re.fullmatch(r"[A-Za-z_]\w*", x) for x in parts):
            continue  # a header
        try:
            if len(parts) not in (2, 3):
                raise ValueError("expected `ctx weight` or `low high weight`")
            ctx = [_ctx_value(x) for x in parts[:-1]]
            weight = float(parts[-1])
            if not (math.isfinite(weight) and weight >= 0):
                raise ValueError(f"weight {parts[-1]!r} must be a number ≥ 0")
            low, high = ctx[0], ctx[-1]
            if high < low:
                raise ValueError(f"bin {parts[0]}–{parts[1]} ends before it starts")
        except ValueError as err:
            raise TraceattrError(f"{where}:{number}: {err}") from None
        bins.append((low, high, weight))
    if not bins or sum(w for *_, w in bins) <= 0:
        raise TraceattrError(f"{where}: no request lengths with a positive weight")
    return tuple(bins)


def _ctx_value(text: str) -> int:
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([kKmM]?)", text)
    if not m:
        raise ValueError(f"{text!r} is not a context length (like 8192, 131k, 1m)")
    value = round(float(m.group(1)) * {"": 1, "k": 1000, "m": 1_000_000}[m.group(2).lower()])
    if value < 1:
        raise ValueError(f"context length {text!r} must be at least 1")
    return value


def _samples(bins: Sequence[Bin]) -> tuple[np.ndarray, np.ndarray]:
    """(ctx, weight) points standing for *bins*: each ranged bin as log-spaced midpoints of equal weight."""
    xs, ws = [], []
    for low, high, weight in bins:
        if low == high:
            xs.append(np.array([float(low)]))
            ws.append(np.array([weight]))
        else:
            edges = np.linspace(math.log(low), math.log(high), _GRID + 1)
            xs.append(np.exp((edges[:-1] + edges[1:]) / 2))
            ws.append(np.full(_GRID, weight / _GRID))
    x, w = np.concatenate(xs), np.concatenate(ws)
    return x, w / w.sum()


def _times(points: Sequence[ShapePoint], backend: str, ctx: np.ndarray) -> np.ndarray:
    """*backend*'s time at *ctx*: log t linear in log ctx between its measured points, the outermost
    segments extended beyond them (one point: that time everywhere)."""
    known = sorted((p.ctx, p.median_us[backend]) for p in points if backend in p.median_us)
    x = np.log([c for c, _ in known])
    y = np.log([t for _, t in known])
    lx = np.log(ctx)
    if len(known) == 1:
        return np.full(len(ctx), math.exp(y[0]))
    out = np.interp(lx, x, y)
    left, right = lx < x[0], lx > x[-1]
    out[left] = y[0] + (lx[left] - x[0]) * (y[1] - y[0]) / (x[1] - x[0])
    out[right] = y[-1] + (lx[right] - x[-1]) * (y[-1] - y[-2]) / (x[-1] - x[-2])
    return np.exp(out)


def graph_safe(
    points: Sequence[ShapePoint], segments: Sequence[Segment], bins: Sequence[Bin] | None = None
) -> GraphSafe | None:
    """The graph-safe choice of one family (module doc); *bins* None: uniform in log ctx over the measured range."""
    everywhere = sorted(set.intersection(*(set(p.median_us) for p in points))) if points else []
    if not everywhere:
        return None
    lo, hi = min(p.ctx for p in points), max(p.ctx for p in points)
    x, w = _samples(bins if bins is not None else [(lo, hi, 1.0)])
    times = {b: _times(points, b, x) for b in everywhere}
    chosen = [lookup(segments, c) for c in x]
    if any(b not in times for b in chosen):
        return None  # the table picks a backend not measured everywhere: no expected time for it
    table = np.array([times[b][i] for i, b in enumerate(chosen)])  # type: ignore[index]
    expected = {b: float(np.dot(w, t)) for b, t in times.items()}
    best = min(expected, key=lambda b: (expected[b], b))
    per_ctx = float(np.dot(w, table))
    worst = float(np.max(np.where(w > 0, times[best] / table - 1, -np.inf)))
    outside = float(w[(x < lo) | (x > hi)].sum())
    return GraphSafe(best, expected[best], per_ctx, expected[best] / per_ctx - 1, worst, expected, outside)


# -- the table ---------------------------------------------------------------------------


def _key(shape: str) -> dict[str, object]:
    s = parse_shape(shape)
    key: dict[str, object] = {"q": s.q, "heads": s.heads, "batch": s.batch, "kv_dtype": s.kv_dtype, "page": s.page}
    key.update({"pattern": s.pattern, "dcp": s.dcp, "prefix": s.prefix})
    return key


def leave_one_out(points: Sequence[ShapePoint]) -> tuple[Held, ...]:
    """Each point predicted by the table of the others (none for a family of one point)."""
    held = []
    for k, p in enumerate(points):
        others = [q for i, q in enumerate(points) if i != k]
        if not others:
            continue
        predicted = lookup(build_segments(others), p.ctx)
        span = (min(q.ctx for q in others), max(q.ctx for q in others))
        held.append(Held(p.ctx, p.shape, predicted, p.fastest, p.regret(predicted), predicted in p.good,
                         not span[0] <= p.ctx <= span[1]))  # fmt: skip
    return tuple(held)


def _loo_regret(held: Sequence[Held]) -> Regret:
    known = [h for h in held if h.regret is not None]
    values = [h.regret for h in known if h.regret is not None]
    return Regret(float(np.mean(values)) if values else None, max(values) if values else None, len(known),
                  sum(h.right for h in known), len(held) - len(known))  # fmt: skip


def dispatch_table(
    summary: pl.DataFrame | None,
    crossings: pl.DataFrame | None,
    bins: Sequence[Bin] | None = None,
    distribution: str = "",
    decision: Decision | None = None,
) -> DispatchTable:
    """The table of a *decision* (:mod:`traceattr.analysis.decision`: its families' segments and points), or of
    a sweep's *summary* (with verdicts) and its *crossings* (:func:`~traceattr.analysis.sweep_points.dispatch_frames`),
    decided here the same way. Families with a single arm have nothing to choose and are left out."""
    if decision is None:
        assert summary is not None and crossings is not None
        decision = decide(summary, frame_crossings(crossings))
    families = []
    for f in decision.families:
        pts = list(f.points)
        if not f.segments or len(f.competitors) + len(f.left_out) < 2:
            continue
        segments = list(f.segments)
        everywhere = sorted(set.intersection(*(set(p.median_us) for p in pts)))
        held = leave_one_out(pts)
        families.append(FamilyTable(
            f.family, _key(pts[0].shape), tuple(pts), tuple(segments),
            Regret.of([(p, lookup(segments, p.ctx)) for p in pts]),
            {b: Regret.of([(p, b) for p in pts]) for b in everywhere},
            held, _loo_regret(held), graph_safe(pts, segments, bins),
        ))  # fmt: skip
    every = [(p, lookup(f.segments, p.ctx)) for f in families for p in f.points]
    held_all = [h for f in families for h in f.loo]
    return DispatchTable(
        tuple(families),
        Regret.of(every),
        _loo_regret(held_all),
        distribution or "uniform in log ctx over each family's measured range",
    )
