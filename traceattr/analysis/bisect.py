"""Where along ctx does the faster of two arms change? The next context length to measure, from those measured.

The pure half of ``traceattr sweep`` (:mod:`traceattr.jobs.crossover_search` runs the captures). A
search knows two arms: ``below`` (the fastest at the low end of the range) and ``above`` (the fastest
at the high end). Each measured ctx is a :class:`Point` whose ``side`` says who is really faster there
(``compare_samples`` of above vs below: ``slower`` → ``below``, ``faster`` → ``above``), or ``same``
(within ±1%, nvbench's "same"), ``ambiguous`` (the interval straddles 1 and is wider than that), or
``refused`` (a gate failed: the point is not used; it is measured once more, then the search stops).

:func:`decide` looks at the points and says what to do next:

* the bracket is the largest ctx where ``below`` really wins (``lo``) under the first ctx above it
  where ``above`` really wins (``hi``): the crossover lies in ``[lo, hi]``;
* done (``crossover``) when the bracket is as narrow as asked: ``hi − lo ≤ width · (hi + lo)``, i.e.
  the crossover is ``(lo + hi) / 2`` within ±``width`` of it;
* otherwise, without a measured point inside the bracket, bisect it in log ctx (the geometric mean);
* with points inside (``same`` or ``ambiguous``: neither arm really faster there), the crossing is a
  band, not a point: its two edges (``lo`` → first inside, last inside → ``hi``) are bisected until
  each is as narrow as asked, and the answer is a ``tie band`` (every inside point ``same``) or an
  ``undecided band`` (some ``ambiguous``: more calls would be needed there);
* ``no crossover`` when one side never really wins in the range, ``budget`` when the steps run out
  (the bracket so far), ``resolution`` when the midpoint rounds onto a measured ctx, ``refused`` when
  one ctx was refused twice.

The crossover estimate interpolates log(t_above / t_below) linearly in log ctx between ``lo`` and
``hi``, as :mod:`traceattr.analysis.crossover` does. Midpoints are rounded to three significant digits
(a shape name such as ``q8_ctx238k``), well inside any width worth asking for.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from traceattr.analysis.stats import Verdict
from traceattr.core.records import SEARCH_KINDS as KINDS
from traceattr.core.records import SEARCH_SIDES as SIDES

Side = str  # one of SIDES (defined with the record that stores it)
Kind = str  # one of KINDS
RETRIES = 1  # a refused ctx is measured once more before the search gives up


def side_of(verdict: Verdict, passed: bool = True) -> Side:
    """The side of a point from the verdict of ``above`` (candidate) against ``below`` (baseline)."""
    if not passed:
        return "refused"
    return {"slower": "below", "faster": "above", "same": "same"}.get(verdict, "ambiguous")


@dataclass(frozen=True)
class Point:
    """One measured ctx: who is really faster there, and t(above) / t(below) with its interval."""

    ctx: int
    side: Side
    ratio: float | None = None
    low: float | None = None
    high: float | None = None

    def __post_init__(self) -> None:
        if self.side not in SIDES:
            raise ValueError(f"side must be one of {', '.join(SIDES)}, got {self.side!r}")


@dataclass(frozen=True)
class Decision:
    """What :func:`decide` says: measure ``next_ctx`` (``kind == "measure"``) or stop with an answer."""

    kind: Kind
    next_ctx: int | None = None
    bracket: tuple[int, int] | None = None  # below really faster at [0], above at [1], nothing decided between
    band: tuple[int, int] | None = None  # the measured ctx inside the bracket where neither arm is really faster
    estimate: int | None = None  # interpolated crossing of the medians inside the bracket

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")

    @property
    def done(self) -> bool:
        return self.kind != "measure"

    def to_json(self) -> dict[str, object]:
        """As search.json stores it (core.records.SearchRecord)."""
        return {"kind": self.kind, "next_ctx": self.next_ctx, "bracket": _pair(self.bracket),
                "band": _pair(self.band), "estimate": self.estimate}  # fmt: skip

    @property
    def center(self) -> int | None:
        """The crossover as ``center ± half_width`` (the bracket's midpoint)."""
        return None if self.bracket is None else round((self.bracket[0] + self.bracket[1]) / 2)

    @property
    def half_width(self) -> float | None:
        """Half the bracket as a fraction of its midpoint: the ``±x`` of the answer."""
        if self.bracket is None:
            return None
        lo, hi = self.bracket
        return (hi - lo) / (hi + lo)


def _pair(pair: tuple[int, int] | None) -> list[int] | None:
    return None if pair is None else list(pair)


def narrow(lo: int, hi: int, width: float) -> bool:
    """Whether ``[lo, hi]`` pins a ctx to ±*width* of its midpoint."""
    return hi - lo <= width * (hi + lo)


def midpoint(lo: int, hi: int) -> int:
    """The geometric mean of *lo* and *hi*, to three significant digits (a readable shape name)."""
    mid = math.sqrt(lo * hi)
    digits = max(0, math.floor(math.log10(mid)) - 2)
    return int(round(mid / 10**digits) * 10**digits)


def decide(points: Sequence[Point], width: float, steps_done: int, max_steps: int) -> Decision:
    """The next ctx to measure, or the answer (see the module doc). *points* in the order measured."""
    if not 0 < width < 1:
        raise ValueError(f"the width must lie in (0, 1), got {width}")
    if points and points[-1].side == "refused":
        refused = sum(1 for p in points if p.ctx == points[-1].ctx and p.side == "refused")
        if refused > RETRIES:
            return Decision("refused", bracket=_bracket(points))
        if steps_done >= max_steps:
            return Decision("budget", bracket=_bracket(points))
        return Decision("measure", next_ctx=points[-1].ctx)
    used = _latest(points)
    bracket = _bracket(points)
    if bracket is None:
        return Decision("no crossover")
    lo, hi = bracket
    inside = [p for p in used if lo < p.ctx < hi]
    band = (inside[0].ctx, inside[-1].ctx) if inside else None
    estimate = _estimate(used, lo, hi)
    if narrow(lo, hi, width):
        return Decision("crossover", bracket=bracket, band=band, estimate=estimate)
    gaps = [(lo, hi)] if not inside else [(lo, inside[0].ctx), (inside[-1].ctx, hi)]
    open_gaps = [g for g in gaps if not narrow(*g, width)]
    if not open_gaps:
        kind = "tie band" if all(p.side == "same" for p in inside) else "undecided band"
        return Decision(kind, bracket=bracket, band=band, estimate=estimate)
    if steps_done >= max_steps:
        return Decision("budget", bracket=bracket, band=band, estimate=estimate)
    a, b = max(open_gaps, key=lambda g: g[1] / g[0])
    mid = midpoint(a, b)
    if not a < mid < b:
        return Decision("resolution", bracket=bracket, band=band, estimate=estimate)
    return Decision("measure", next_ctx=mid, bracket=bracket, band=band, estimate=estimate)


def _latest(points: Sequence[Point]) -> list[Point]:
    """The usable points by ctx: the latest measurement of each ctx that was not refused."""
    by_ctx = {p.ctx: p for p in points if p.side != "refused"}
    return [by_ctx[c] for c in sorted(by_ctx)]


def _bracket(points: Sequence[Point]) -> tuple[int, int] | None:
    """(lo, hi): the first ctx where ``above`` really wins and the last ctx below it where ``below`` does."""
    used = _latest(points)
    first_above = next((p.ctx for p in used if p.side == "above"), None)
    if first_above is None:
        return None
    below = [p.ctx for p in used if p.side == "below" and p.ctx < first_above]
    return (below[-1], first_above) if below else None


def _estimate(used: Sequence[Point], lo: int, hi: int) -> int | None:
    """Where log(t_above / t_below) crosses 0, linear in log ctx over the measured points in ``[lo, hi]``."""
    pts = [(math.log(p.ctx), math.log(p.ratio)) for p in used if lo <= p.ctx <= hi and p.ratio and p.ratio > 0]
    for (x0, y0), (x1, y1) in itertools.pairwise(pts):
        if y0 == 0:
            return round(math.exp(x0))
        if (y0 > 0) != (y1 > 0) or y1 == 0:
            return round(math.exp(x0 + y0 / (y0 - y1) * (x1 - x0)))
    return None
