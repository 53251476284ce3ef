"""Where along ctx does the faster of two arms change? The next context length to measure, from those measured.

The pure half of ``traceattr sweep`` (:mod:`traceattr.jobs.sweep` runs the captures). A
sweep knows two arms: ``below`` (the fastest at the low end of the range) and ``above`` (the fastest
at the high end). Each measured ctx is a :class:`Point` whose ``side`` says who is really faster there
(``compare_samples`` of above vs below: ``slower`` → ``below``, ``faster`` → ``above``), or ``same``
(within ±1%, nvbench's "same"), ``ambiguous`` (the interval straddles 1 and is wider than that), or
``refused`` (a gate failed, its ``cause`` says which: the point is not used).

:func:`decide` looks at the points and says what to do next:

* a refused ctx, end or interior, is measured once more (:data:`RETRIES`) before anything is
  concluded; refused again, the answer is ``refused`` naming that ctx and its cause; a refused point
  is never read as a side (at step 1 an end refused by a gate is not an answer of "no crossover");
* the bracket is the largest ctx where ``below`` really wins (``lo``) under the first ctx above it
  where ``above`` really wins (``hi``): the crossover lies in ``[lo, hi]``;
* done (``crossover``) when the bracket is as narrow as asked: ``hi − lo ≤ width · (hi + lo)``, i.e.
  the crossover is ``(lo + hi) / 2`` within ±``width`` of it;
* otherwise, without a measured point inside the bracket, bisect it in log ctx (the geometric mean);
* with points inside (``same`` or ``ambiguous``: neither arm really faster there), the crossing is a
  band, not a point: its two edges (``lo`` → first inside, last inside → ``hi``) are bisected until
  each is as narrow as asked, and the answer is a ``tie band`` (every inside point ``same``) or an
  ``undecided band`` (some ``ambiguous``: more calls would be needed there);
* ``several crossovers`` when the really-faster arm changes more than once along the measured ctx
  (every change listed in ``crossings``): one bracket would hide the others;
* ``no crossover`` when one side never really wins in the range (``ends``: the sides at the lowest
  and highest ctx measured), ``budget`` when the steps run out (the bracket so far, its ``half_width``
  against the one asked), ``resolution`` when the midpoint rounds onto a measured ctx.

A single change the other way round (``above`` really faster at the low end, ``below`` at the high
end: possible only when step 1's medians named the arms from a refused end) is bisected all the same,
with ``swapped`` set: the names of the two arms are then each other's.

The crossover estimate interpolates log(t_above / t_below) linearly in log ctx between ``lo`` and
``hi``, as :mod:`traceattr.analysis.crossover` does. Midpoints are rounded to three significant digits
(a shape name such as ``q8_ctx238k``), well inside any width worth asking for.

:func:`default_steps` is the step budget a range and a width need: step 1 (both ends in one capture),
the halvings of log ctx that reach the width, and room for :data:`RETRY_ROOM` refused points.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from traceattr.analysis.stats import Verdict
from traceattr.core.records import SWEEP_KINDS as KINDS
from traceattr.core.records import SWEEP_SIDES as SIDES

Side = str  # one of SIDES (defined with the record that stores it)
Kind = str  # one of KINDS
RETRIES = 1  # a refused ctx is measured once more before the sweep gives up
RETRY_ROOM = 2  # refused points the default budget leaves room for (each measured once more)
# midpoints rounded to three significant digits move each end by up to 0.5%: the budget asks the
# halvings for that much more than the width, so a rounded bracket still reaches it
_ROUNDING = 0.01
_SWAP = {"below": "above", "above": "below"}


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
    cause: str = ""  # a refused point: the gate that refused it (``directional 0.0292 > 0.02``)

    def __post_init__(self) -> None:
        if self.side not in SIDES:
            raise ValueError(f"side must be one of {', '.join(SIDES)}, got {self.side!r}")


def _from_pair(value: Any) -> Any:
    """A stored ``[a, b]`` as the tuple the record holds (None stays None)."""
    return None if value is None else (value[0], value[1])


@dataclass(frozen=True)
class Decision:
    """What :func:`decide` says: measure ``next_ctx`` (``kind == "measure"``) or stop with an answer."""

    kind: Kind
    next_ctx: int | None = None
    bracket: tuple[int, int] | None = None  # below really faster at [0], above at [1], nothing decided between
    band: tuple[int, int] | None = None  # the measured ctx inside the bracket where neither arm is really faster
    estimate: int | None = None  # interpolated crossing of the medians inside the bracket
    width: float | None = None  # the ± asked (what half_width is held against)
    refused: tuple[int, str] | None = None  # a ctx whose latest measurement was refused, and the cause
    crossings: tuple[tuple[int, int], ...] = ()  # every change of the really-faster arm between measured ctx
    ends: tuple[Side, Side] | None = None  # the sides at the lowest and the highest ctx measured (usable)
    swapped: bool = False  # the one change runs above → below: the arms' names are each other's

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")

    @property
    def done(self) -> bool:
        return self.kind != "measure"

    def to_json(self) -> dict[str, object]:
        """As sweep.json stores it (core.records.SweepRecord)."""
        return {"kind": self.kind, "next_ctx": self.next_ctx, "bracket": _pair(self.bracket),
                "band": _pair(self.band), "estimate": self.estimate, "half_width": self.half_width,
                "width": self.width,
                "refused": None if self.refused is None else {"ctx": self.refused[0], "cause": self.refused[1]},
                "crossings": [list(c) for c in self.crossings], "ends": _pair(self.ends),
                "swapped": self.swapped}  # fmt: skip

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Decision:
        """A stored decision again (a record's ``result`` or a step's ``decision``, as its reader checked it)."""
        refused, crossings = d.get("refused"), d.get("crossings")
        return cls(
            d["kind"],
            d.get("next_ctx"),
            _from_pair(d.get("bracket")),
            _from_pair(d.get("band")),
            d.get("estimate"),
            d.get("width"),
            None if refused is None else (int(refused["ctx"]), str(refused.get("cause", ""))),
            () if crossings is None else tuple((int(c[0]), int(c[1])) for c in crossings),
            _from_pair(d.get("ends")),
            bool(d.get("swapped", False)),
        )

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


def _pair(pair: tuple | None) -> list | None:
    return None if pair is None else list(pair)


def narrow(lo: int, hi: int, width: float) -> bool:
    """Whether ``[lo, hi]`` pins a ctx to ±*width* of its midpoint."""
    return hi - lo <= width * (hi + lo)


def midpoint(lo: int, hi: int) -> int:
    """The geometric mean of *lo* and *hi*, to three significant digits (a readable shape name)."""
    mid = math.sqrt(lo * hi)
    digits = max(0, math.floor(math.log10(mid)) - 2)
    return int(round(mid / 10**digits) * 10**digits)


def halvings(lo: int, hi: int, width: float) -> int:
    """How many bisections in log ctx take ``[lo, hi]`` to ±*width* (a point crossover, no band)."""
    span = math.log(hi / lo)
    reach = math.log((1 + width) / (1 - width))  # narrow(): hi / lo ≤ (1 + w) / (1 − w)
    if span <= reach:
        return 0
    return math.ceil(math.log2(span / max(reach - _ROUNDING, reach / 2)))


def default_steps(lo: int, hi: int, width: float) -> int:
    """The step budget of a sweep over ``[lo, hi]`` to ±*width* (module doc): 1 + halvings + retries."""
    return 1 + halvings(lo, hi, width) + RETRY_ROOM * RETRIES


def decide(points: Sequence[Point], width: float, steps_done: int, max_steps: int) -> Decision:
    """The next ctx to measure, or the answer (see the module doc). *points* in the order measured."""
    if not 0 < width < 1:
        raise ValueError(f"the width must lie in (0, 1), got {width}")
    if not points:
        raise ValueError("no measured point to decide from")
    used = _latest(points)
    pending = _pending(points)
    if pending:  # a refused ctx is measured again before anything is concluded from the others
        point, times = next(((p, n) for p, n in pending if n > RETRIES), pending[0])
        why = (point.ctx, point.cause)
        so_far = _answer_so_far(used, width)
        if times > RETRIES:
            return replace(so_far, kind="refused", refused=why)
        if steps_done >= max_steps:
            return replace(so_far, kind="budget", refused=why)
        return replace(so_far, kind="measure", next_ctx=point.ctx, refused=why)
    crossings = _changes(used)
    ends = (used[0].side, used[-1].side) if used else None
    if len(crossings) > 1:
        return Decision("several crossovers", crossings=tuple(crossings), ends=ends, width=width)
    swapped = len(crossings) == 1 and _side_at(used, crossings[0][0]) == "above"
    if swapped:
        used = [replace(p, side=_SWAP.get(p.side, p.side)) for p in used]
    bracket = _bracket(used)
    if bracket is None:
        return Decision("no crossover", ends=ends, width=width)
    lo, hi = bracket
    inside = [p for p in used if lo < p.ctx < hi]
    band = (inside[0].ctx, inside[-1].ctx) if inside else None
    answer = Decision("crossover", bracket=bracket, band=band, estimate=_estimate(used, lo, hi), width=width,
                      crossings=tuple(crossings), ends=ends, swapped=swapped)  # fmt: skip
    if narrow(lo, hi, width):
        return answer
    gaps = [(lo, hi)] if not inside else [(lo, inside[0].ctx), (inside[-1].ctx, hi)]
    open_gaps = [g for g in gaps if not narrow(*g, width)]
    if not open_gaps:
        kind = "tie band" if all(p.side == "same" for p in inside) else "undecided band"
        return replace(answer, kind=kind)
    if steps_done >= max_steps:
        return replace(answer, kind="budget")
    a, b = max(open_gaps, key=lambda g: g[1] / g[0])
    mid = midpoint(a, b)
    if not a < mid < b:
        return replace(answer, kind="resolution")
    return replace(answer, kind="measure", next_ctx=mid)


def _answer_so_far(used: list[Point], width: float) -> Decision:
    """The bracket, band and estimate of the usable points, while a refused ctx waits (kind to be set)."""
    bracket = _bracket(used)
    if bracket is None:
        return Decision("budget", width=width)
    lo, hi = bracket
    inside = [p for p in used if lo < p.ctx < hi]
    band = (inside[0].ctx, inside[-1].ctx) if inside else None
    return Decision("budget", bracket=bracket, band=band, estimate=_estimate(used, lo, hi), width=width)


def _latest(points: Sequence[Point]) -> list[Point]:
    """The usable points by ctx: the latest measurement of each ctx, where it was not refused."""
    by_ctx = {p.ctx: p for p in points}
    return [by_ctx[c] for c in sorted(by_ctx) if by_ctx[c].side != "refused"]


def _pending(points: Sequence[Point]) -> list[tuple[Point, int]]:
    """Each ctx whose latest measurement was refused, by ctx: that measurement and how often it was refused."""
    by_ctx = {p.ctx: p for p in points}
    return [(by_ctx[c], sum(1 for p in points if p.ctx == c and p.side == "refused"))
            for c in sorted(by_ctx) if by_ctx[c].side == "refused"]  # fmt: skip


def _changes(used: Sequence[Point]) -> list[tuple[int, int]]:
    """(lo, hi) of each change of the really-faster arm between measured ctx (same/ambiguous skipped)."""
    decided = [p for p in used if p.side in ("below", "above")]
    return [(p.ctx, q.ctx) for p, q in itertools.pairwise(decided) if p.side != q.side]


def _side_at(used: Sequence[Point], ctx: int) -> Side:
    return next(p.side for p in used if p.ctx == ctx)


def _bracket(used: Sequence[Point]) -> tuple[int, int] | None:
    """(lo, hi): the first ctx where ``above`` really wins and the last ctx below it where ``below`` does."""
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
