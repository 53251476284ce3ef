"""The decision, computed once: per shape its winner or tie, per shape family one line of segments along ctx.

Every surface (the terminal verdict, ``compare --json``, ``traceattr dispatch``, the HTML report, the
sweep page, a round's views) renders a :class:`Decision` and decides nothing itself, so they cannot
disagree. It is built from the summary's per-shape verdicts (:mod:`traceattr.analysis.verdicts`: the
fastest is the *winner* where every other competitor is really slower) and, for the breakpoints of a
family, the crossings of the pairs of backends that meet there (:func:`traceattr.analysis.crossover.pair_crossings`
over per-call samples, or a sweep record's own gated crossings).

**One family, one line.** Shapes that differ only in ctx form a family. Its competitors are the arms
measured at *every* ctx of the family that are not the same program as another arm (fa3-per-token at
q = 1 is fa3): an arm measured at fewer ctx, or a twin, is *left out* and named beside the line, never
a reason for "no rule". At each ctx the *good* arms are the competitors not really slower than the
fastest competitor there (the winner, or every arm of the tie). The segments cover the ctx axis with as
few switches as possible, each segment's arm good at every measured ctx inside it
(:func:`traceattr.analysis.dispatch_table.build_segments`). Each switch is a *breakpoint*: where the
two arms' medians cross, *decided* where the one below is really faster at the nearest measured ctx
below and the one above really faster at the nearest above (ties only between; the "rule"), else
within noise. A family is ``one backend`` (one segment), ``rule`` (every breakpoint decided) or
``undecided``; the dispatch an engine loads is the segments in every case.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import polars as pl

from traceattr.analysis.crossover import CROSSOVER_SCHEMA, sample_crossings, with_family
from traceattr.analysis.segments import Segment, ShapePoint, build_segments, lookup
from traceattr.analysis.stats import SAME_WITHIN
from traceattr.analysis.verdicts import SameProgram, same_label
from traceattr.core.precision import CONFIDENCE
from traceattr.core.shapes import ShapeError, parse_shape

SCHEMA = "traceattr.decision/1"
# one crossing of two arms in a family, as a row of CROSSOVER_SCHEMA (faster_below, faster_above, ctx_low, …)
Crossing = Mapping[str, Any]
# (family, arm below, arm above) -> every crossing of that pair along the family's ctx, lowest first
CrossingsFor = Callable[[str, str, str], Sequence[Crossing]]
ShapeOutcome = Literal["winner", "tie", "alone"]
FamilyOutcome = Literal["one backend", "rule", "undecided", "none"]


@dataclass(frozen=True)
class Ratio:
    """A ratio of medians with its interval: ``value`` [``low``, ``high``]."""

    value: float | None
    low: float | None = None
    high: float | None = None

    def inverse(self) -> Ratio:
        def inv(x: float | None) -> float | None:
            return None if x is None or x == 0 else 1 / x

        return Ratio(inv(self.value), inv(self.high), inv(self.low))

    def to_json(self) -> dict[str, Any]:
        return {"ratio": _finite(self.value), "ci": [_finite(self.low), _finite(self.high)]}


@dataclass(frozen=True)
class ShapeVerdict:
    """One shape's answer. ``margin`` is the runner-up's time over the winner's (> 1), with its interval."""

    shape: str
    outcome: ShapeOutcome
    backend: str  # the winner, or the fastest competitor of a tie (or the one competitor)
    runner_up: str | None = None  # the fastest other competitor (never a same-program twin)
    margin: Ratio | None = None
    tied: tuple[str, ...] = ()  # a tie: every competitor not really slower than the fastest, fastest first
    tie_pct: float | None = None  # how far the tie's intervals reach from 1, in %
    same_program: tuple[tuple[str, str], ...] = ()  # (arm, the arm whose program it runs): not compared
    family: str | None = None
    ctx: int | None = None
    medians_us: Mapping[str, float] = field(default_factory=dict)

    @property
    def decided(self) -> bool:
        return self.outcome == "winner" and self.runner_up is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "outcome": self.outcome,
            "backend": self.backend,
            "runner_up": self.runner_up,
            "margin": None if self.margin is None else self.margin.to_json(),
            "tied": list(self.tied),
            "tie_pct": _finite(self.tie_pct),
            "same_program": [{"arm": a, "as": b} for a, b in self.same_program],
        }


@dataclass(frozen=True)
class Breakpoint:
    """Where a family's dispatch switches from ``below`` to ``above``; ratios are t(above) / t(below)."""

    ctx: int
    below: str
    above: str
    measured: tuple[int, int]  # the measured ctx that bracket it (widened to decided points where possible)
    decided: bool
    at_low: Ratio = Ratio(None)
    at_high: Ratio = Ratio(None)
    noise_pct: float | None = None  # undecided: how far the undecided intervals reach from 1, in %

    def row(self, family: str) -> dict[str, Any]:
        """As a row of :data:`~traceattr.analysis.crossover.CROSSOVER_SCHEMA` (crossovers.csv, the charts)."""
        return {
            "family": family, "faster_below": self.below, "faster_above": self.above,
            "ctx_low": self.measured[0], "ctx_high": self.measured[1], "crossover_ctx": self.ctx,
            "decided": self.decided, "ratio_at_low": self.at_low.value, "ratio_at_low_lo": self.at_low.low,
            "ratio_at_low_hi": self.at_low.high, "ratio_at_high": self.at_high.value,
            "ratio_at_high_lo": self.at_high.low, "ratio_at_high_hi": self.at_high.high, "noise_pct": self.noise_pct,
        }  # fmt: skip


@dataclass(frozen=True)
class LeftOut:
    """An arm of a family that takes no part in its line, and why."""

    arm: str
    why: Literal["same program", "partial"]
    as_arm: str | None = None  # same program: the arm whose program it runs
    measured: int = 0  # partial: at how many of the family's ctx
    of: int = 0

    def text(self) -> str:
        if self.why == "same program":
            return f"{self.arm} runs {self.as_arm}'s program: not compared"
        return f"{self.arm} measured at {self.measured} of {self.of} ctx: left out of the rule"


@dataclass(frozen=True)
class RefusedPoint:
    """A ctx of a family whose row a round's receipt refused: no point of the family's line, and why."""

    shape: str
    ctx: int
    why: str  # the gate that failed, as the receipt words it (``directional 0.0201 > 0.02``)


@dataclass(frozen=True)
class FamilyVerdict:
    """One shape family along ctx: the dispatch (segments), its breakpoints, the arms left out, and the rows a round
    refused (a rule there may be missing for that reason, not for noise)."""

    family: str
    ctx: tuple[int, ...]  # measured, ascending
    outcome: FamilyOutcome
    segments: tuple[Segment, ...]
    breakpoints: tuple[Breakpoint, ...]
    points: tuple[ShapePoint, ...]  # per measured ctx: the competitors' medians and which of them are good
    left_out: tuple[LeftOut, ...] = ()
    competitors: tuple[str, ...] = ()
    refused: tuple[RefusedPoint, ...] = ()  # ascending ctx

    @property
    def along_ctx(self) -> bool:
        """Measured at two or more ctx, refused rows included: a family with a line to state (or to say why not)."""
        return len({*self.ctx, *(r.ctx for r in self.refused)}) >= 2

    @property
    def rules(self) -> tuple[Breakpoint, ...]:
        return tuple(b for b in self.breakpoints if b.decided)

    @property
    def ties(self) -> tuple[Breakpoint, ...]:
        return tuple(b for b in self.breakpoints if not b.decided)

    def backend_at(self, ctx: float) -> str | None:
        return lookup(self.segments, ctx)

    def to_json(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "outcome": self.outcome,
            "measured_ctx": list(self.ctx),
            "dispatch": [_segment_json(s) for s in self.segments],
            "breakpoints": [
                {
                    "ctx": b.ctx,
                    "below": b.below,
                    "above": b.above,
                    "measured": list(b.measured),
                    "decided": b.decided,
                    "ratio_at_low": b.at_low.to_json(),
                    "ratio_at_high": b.at_high.to_json(),
                    "noise_pct": _finite(b.noise_pct),
                }
                for b in self.breakpoints
            ],
            "left_out": [
                {"arm": x.arm, "why": x.why, "as": x.as_arm, "measured": x.measured, "of": x.of} for x in self.left_out
            ],
            "refused": [{"shape": r.shape, "ctx": r.ctx, "why": r.why} for r in self.refused],
        }


@dataclass(frozen=True)
class Provenance:
    """What the decision rests on."""

    statistic: str = "median GPU span per call (first op start to last op end), µs"
    basis: str = "span"
    confidence: float = CONFIDENCE
    same_within: float = SAME_WITHIN
    source: str = ""
    gates: str | None = None  # a round's receipt the decision was gated by (its path), where one was
    note: str | None = None  # what the calls' time holds besides the call (analysis.pipeline.other_work)


@dataclass(frozen=True)
class Decision:
    """Every verdict of one analysis: per shape, per family, and what they rest on."""

    shapes: tuple[ShapeVerdict, ...]
    families: tuple[FamilyVerdict, ...]
    provenance: Provenance = Provenance()
    refused: Mapping[str, str] = field(default_factory=dict)  # shape -> why a round's receipt refused it

    def shape(self, name: str) -> ShapeVerdict | None:
        return next((s for s in self.shapes if s.shape == name), None)

    def family(self, name: str) -> FamilyVerdict | None:
        return next((f for f in self.families if f.family == name), None)

    def crossings_frame(self) -> pl.DataFrame:
        """Every family's breakpoints as :data:`~traceattr.analysis.crossover.CROSSOVER_SCHEMA` rows."""
        rows = [b.row(f.family) for f in self.families for b in f.breakpoints]
        return (
            pl.DataFrame(rows, schema=CROSSOVER_SCHEMA, orient="row") if rows else pl.DataFrame(schema=CROSSOVER_SCHEMA)
        )

    def to_json(self) -> dict[str, Any]:
        p = self.provenance
        return {
            "schema": SCHEMA,
            "source": p.source,
            "statistic": p.statistic,
            "basis": p.basis,
            "confidence": p.confidence,
            "same_within": p.same_within,
            "gates": p.gates,
            "note": p.note,
            "families": [f.to_json() for f in self.families],
            "shapes": [s.to_json() for s in self.shapes],
            "refused": dict(self.refused),
        }


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _segment_json(s: Segment) -> dict[str, Any]:
    out: dict[str, Any] = {"ctx_from": s.ctx_from, "ctx_to": s.ctx_to, "backend": s.backend}
    if s.measured is not None:
        out.update(measured=list(s.measured), decided=s.decided)
    return out


# -- building it ----------------------------------------------------------------------------------


def decide(
    summary: pl.DataFrame,
    crossings_for: CrossingsFor,
    provenance: Provenance | None = None,
    refused: Mapping[str, str] | None = None,
) -> Decision:
    """The decision of *summary* (rows ``shape, backend, median_us`` with the verdict columns of
    :func:`traceattr.analysis.verdicts.shape_verdicts`); *refused*: shapes a round's receipt refused
    (they have no verdict and no family point)."""
    refused = dict(refused or {})
    if "same_program_as" not in summary.columns:  # a sweep record's rows: two arms, never one program
        summary = summary.with_columns(pl.lit(None, pl.String).alias("same_program_as"))
    rows = summary.filter(~pl.col("shape").is_in(list(refused))) if refused else summary
    shapes = tuple(_shape_verdict(shape, part) for shape, part in _by_shape(rows))
    fam = with_family(rows.select("shape", "backend", "median_us", "verdict", "same_program_as", *_extra(rows)))
    held = _refused_points(refused)
    families = []
    for family in sorted(fam["family"].unique().to_list()):  # a family every row of which was refused has no line
        part = fam.filter(pl.col("family") == family)
        families.append(replace(_family_verdict(family, part, crossings_for), refused=held.get(family, ())))
    placed = {s: (f, c) for s, f, c in fam.select("shape", "family", "ctx").unique().iter_rows()}
    shapes = tuple(replace(v, family=placed[v.shape][0], ctx=placed[v.shape][1]) if v.shape in placed else v
                   for v in shapes)  # fmt: skip
    return Decision(shapes, tuple(families), provenance or Provenance(), refused)


def _refused_points(refused: Mapping[str, str]) -> dict[str, tuple[RefusedPoint, ...]]:
    """Per family, the refused rows that belong to it (by ctx); a refused name that is no shape has none."""
    out: dict[str, list[RefusedPoint]] = {}
    for name, why in refused.items():
        try:
            shape = parse_shape(name)
        except ShapeError:
            continue
        out.setdefault(shape.family, []).append(RefusedPoint(name, shape.ctx, why))
    return {f: tuple(sorted(points, key=lambda r: r.ctx)) for f, points in out.items()}


def _extra(rows: pl.DataFrame) -> list[str]:
    return [c for c in ("ratio_to_best", "vs_best_low", "vs_best_high", "tie_pct", "winner") if c in rows.columns]


def shape_key(name: str) -> tuple[str, int, str]:
    """Shapes of one family together, by context length; names that are no shape by themselves."""
    try:
        shape = parse_shape(name)
    except ShapeError:
        return (name, 0, name)
    return (shape.family, shape.ctx, name)


def _by_shape(rows: pl.DataFrame) -> Iterable[tuple[str, pl.DataFrame]]:
    for shape in sorted(rows["shape"].unique().to_list(), key=shape_key):
        yield shape, rows.filter(pl.col("shape") == shape)


def _shape_verdict(shape: str, part: pl.DataFrame) -> ShapeVerdict:
    ranked = part.sort("median_us", "backend", nulls_last=True).to_dicts()
    medians = {r["backend"]: r["median_us"] for r in ranked if r["median_us"] is not None}
    twins = tuple((r["backend"], r["same_program_as"]) for r in ranked if r["verdict"] == "same program")
    rivals = [r for r in ranked if r["verdict"] != "same program"]
    if not rivals:  # only twins of each other (cannot happen: one of them is the program's owner)
        rivals = ranked[:1]
    best = next((r for r in rivals if r["verdict"] in ("winner", "tie", "alone")), rivals[0])
    others = [r for r in rivals if r is not best]
    runner = others[0] if others else None
    margin = None
    if runner is not None and runner.get("ratio_to_best") is not None:
        margin = Ratio(runner["ratio_to_best"], runner.get("vs_best_low"), runner.get("vs_best_high"))
    common = {"shape": shape, "same_program": twins, "medians_us": medians, "margin": margin,
              "runner_up": None if runner is None else runner["backend"]}  # fmt: skip
    if best["verdict"] == "winner":
        return ShapeVerdict(outcome="winner", backend=best["backend"], **common)  # type: ignore[arg-type]
    tied = [r["backend"] for r in rivals if r["verdict"] == "tie"]
    if best["verdict"] == "tie" or tied:
        ordered = tuple(dict.fromkeys([best["backend"], *tied]))
        return ShapeVerdict(outcome="tie", backend=best["backend"], tied=ordered, tie_pct=best.get("tie_pct"),
                            **common)  # type: ignore[arg-type]  # fmt: skip
    return ShapeVerdict(outcome="alone", backend=best["backend"], **common)  # type: ignore[arg-type]


def _family_verdict(family: str, part: pl.DataFrame, crossings_for: CrossingsFor) -> FamilyVerdict:
    ctx = tuple(sorted(part["ctx"].unique().to_list()))
    left_out: list[LeftOut] = []
    competitors = []
    for arm in sorted(part["backend"].unique().to_list()):
        mine = part.filter(pl.col("backend") == arm)
        twin_of = mine.filter(pl.col("verdict") == "same program")["same_program_as"].drop_nulls()
        if twin_of.len() == mine.height:  # the same program as another arm wherever it was measured
            left_out.append(LeftOut(arm, "same program", as_arm=twin_of[0]))
        elif mine["ctx"].n_unique() < len(ctx):
            left_out.append(LeftOut(arm, "partial", measured=mine["ctx"].n_unique(), of=len(ctx)))
        else:
            competitors.append(arm)
    points = []
    for c in ctx:
        at = part.filter((pl.col("ctx") == c) & pl.col("backend").is_in(competitors))
        medians = {b: t for b, t in zip(at["backend"], at["median_us"], strict=True) if t is not None and t > 0}
        good = {b for b, v in zip(at["backend"], at["verdict"], strict=True) if v in ("winner", "tie", "alone")}
        good &= set(medians)
        if not good and medians:  # the shape's best is an arm left out: the fastest competitor leads here
            good = {min(medians, key=lambda b: (medians[b], b))}
        if medians:
            points.append(ShapePoint(c, at["shape"][0], medians, frozenset(good)))
    if not competitors or len(points) < len(ctx):
        return FamilyVerdict(family, ctx, "none", (), (), tuple(points), tuple(left_out), tuple(competitors))
    cut = build_segments(points)
    breaks, segments = [], []
    for i, seg in enumerate(cut):
        if i == 0:
            segments.append(seg)
            continue
        prev = segments[-1]
        b = _breakpoint(family, prev, seg, crossings_for)
        breaks.append(b)
        segments[-1] = Segment(prev.ctx_from, b.ctx, prev.backend, prev.measured, prev.decided)
        segments.append(Segment(b.ctx, seg.ctx_to, seg.backend, b.measured, b.decided))
    outcome: FamilyOutcome = (
        "one backend" if len(segments) == 1 else "rule" if all(b.decided for b in breaks) else "undecided"
    )
    return FamilyVerdict(family, ctx, outcome, tuple(segments), tuple(breaks), tuple(points), tuple(left_out),
                         tuple(competitors))  # fmt: skip


def _breakpoint(family: str, prev: Segment, seg: Segment, crossings_for: CrossingsFor) -> Breakpoint:
    """The switch from *prev*'s arm to *seg*'s: their crossing nearest below the first ctx *seg* is chosen at."""
    assert seg.measured is not None and seg.ctx_from is not None
    last_prev, first_next = seg.measured
    start = prev.measured[1] if prev.measured is not None else 0  # the first ctx prev's arm is chosen at
    rows = [
        r for r in crossings_for(family, prev.backend, seg.backend)
        if r["faster_below"] == prev.backend and r["faster_above"] == seg.backend
        and start <= r["crossover_ctx"] <= first_next
    ]  # fmt: skip
    if not rows:  # the medians do not cross where the dispatch switches: no rule rests on it
        return Breakpoint(seg.ctx_from, prev.backend, seg.backend, (last_prev, first_next), False)
    r = max(rows, key=lambda r: r["crossover_ctx"])
    return Breakpoint(
        r["crossover_ctx"], prev.backend, seg.backend, (r["ctx_low"], r["ctx_high"]), bool(r["decided"]),
        Ratio(r["ratio_at_low"], r["ratio_at_low_lo"], r["ratio_at_low_hi"]),
        Ratio(r["ratio_at_high"], r["ratio_at_high_lo"], r["ratio_at_high_hi"]),
        None if r["decided"] else r["noise_pct"],
    )  # fmt: skip


def crossovers(summary: pl.DataFrame, calls: pl.DataFrame, *, same_program: SameProgram = same_label) -> pl.DataFrame:
    """The breakpoints of each family's line (:data:`~traceattr.analysis.crossover.CROSSOVER_SCHEMA`): the frame
    crossovers.csv holds and the charts draw; *calls* are *summary*'s per-call rows (the samples)."""
    return decide(summary, sample_crossings(summary, calls, same_program)).crossings_frame()


def frame_crossings(crossings: pl.DataFrame) -> CrossingsFor:
    """Crossings already computed (a sweep record's, :func:`traceattr.analysis.sweep_points.dispatch_frames`)."""
    rows = crossings.sort("crossover_ctx").to_dicts() if crossings.height else []

    def lookup(family: str, a: str, b: str) -> Sequence[Crossing]:
        return [r for r in rows if r["family"] == family and {r["faster_below"], r["faster_above"]} == {a, b}]

    return lookup
