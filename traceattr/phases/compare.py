"""Phases on two sides: per row and phase the change and its interval, for a round (baseline vs candidate over
its captures) and for ``diff`` (before vs after); and which phases moved.

One statistic for both: each side's median of the phase over all its calls (every capture pooled), the
change candidate − baseline, and as its interval the two medians' distribution-free 95% intervals
combined the conservative way (``[cand_low − base_high, cand_high − base_low]``). A phase *moved* when that
interval excludes 0. A phase only one side has (the reduce kernel's, against an in-kernel merge) counts
0 on the other, so the kernel that went away shows as the time it took.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from traceattr.core.precision import median_interval
from traceattr.core.runfolder import SENSITIVITY, has_stamps
from traceattr.phases.report import PhaseReport, Roofline, natural, phase_report


@dataclass(frozen=True)
class PhaseDelta:
    """One phase of one row: each side's median over its calls, and the change with its interval."""

    shape: str
    phase: str
    baseline_ns: float
    candidate_ns: float
    low_ns: float  # the change's interval: the medians' 95% intervals combined (conservative)
    high_ns: float
    baseline_calls: int = 0  # calls of the phase (0: that side has no such phase)
    candidate_calls: int = 0

    @property
    def delta_ns(self) -> float:
        return self.candidate_ns - self.baseline_ns

    @property
    def moved(self) -> bool:
        """The interval excludes no change."""
        return self.low_ns > 0 or self.high_ns < 0


@dataclass(frozen=True)
class PhaseComparison:
    """Two sides' phases per row (shape): *baseline* and *candidate* name the sides (arm labels)."""

    baseline: str
    candidate: str
    deltas: tuple[PhaseDelta, ...]  # by row, then in critical-path order

    @property
    def shapes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(d.shape for d in self.deltas))

    def of(self, shape: str) -> tuple[PhaseDelta, ...]:
        return tuple(d for d in self.deltas if d.shape == shape)

    def moved(self, shape: str) -> tuple[PhaseDelta, ...]:
        """The row's phases whose change excludes 0, the largest change first: which phase moved."""
        return tuple(sorted((d for d in self.of(shape) if d.moved), key=lambda d: (-abs(d.delta_ns), d.phase)))


def compare_calls(calls: pl.DataFrame, baseline: str, candidate: str) -> PhaseComparison:
    """Per shape both arms ran, each phase of *baseline*'s and *candidate*'s calls (attribute.call_phases rows,
    pooled over captures) and the change."""
    both = calls.filter(pl.col("arm").is_in([baseline, candidate]))
    out = []
    for (shape,), row in both.group_by(["shape"], maintain_order=True):
        if row["arm"].n_unique() < 2 and baseline != candidate:
            continue  # an arm that did not run this row: nothing to compare
        for phase in row.sort("k", "order")["phase"].unique(maintain_order=True).to_list():
            b, c = (_median(row, arm, phase) for arm in (baseline, candidate))
            out.append(PhaseDelta(str(shape), phase, b[0], c[0], c[1] - b[2], c[2] - b[1], b[3], c[3]))
    return PhaseComparison(baseline, candidate, tuple(sorted(out, key=lambda d: natural(d.shape))))


def _median(calls: pl.DataFrame, arm: str, phase: str) -> tuple[float, float, float, int]:
    """(median, low, high, calls) of *arm*'s *phase* over *calls*; zeros for a phase the arm does not have."""
    v = calls.filter((pl.col("arm") == arm) & (pl.col("phase") == phase))["duration_ns"].to_numpy()
    if len(v) == 0:
        return 0.0, 0.0, 0.0, 0
    lo, hi = median_interval(v)
    return float(np.median(v)), lo, hi, len(v)


@dataclass(frozen=True)
class RoundPhases:
    """A round's phases: each stamped capture's record and, per row, the candidate's change from the baseline."""

    captures: tuple[PhaseReport, ...]  # the ABBA captures with stamps, in order
    comparison: PhaseComparison


def round_captures(folder: Path, captures: Sequence[str]) -> tuple[Path, ...]:
    """The stamped ABBA captures of the round in *folder* among its receipt's *captures*, in order: where the
    receipt says, else beside it (the round moved), as the round's page finds them; the back-to-back
    sensitivity capture is not one of them."""
    found = []
    for name in captures:
        stored = Path(name)
        if stored.name == SENSITIVITY:
            continue
        for candidate in (stored, folder / stored.name):
            if has_stamps(candidate):
                found.append(candidate)
                break
    return tuple(found)


def round_phases(
    folder: Path,
    baseline: str,
    candidate: str,
    captures: Sequence[str],
    roofline: Roofline | None = None,
    latest: Mapping[str, int] | None = None,
) -> RoundPhases | None:
    """The phases of the round in *folder* (its receipt's arms and capture folders); None without stamps.

    *latest*: per row (shape), how many captures its latest attempt took (the receipt's ``captures``): a
    retried row is compared over those, the last that hold it, as its verdict is."""
    reports = [r for r in (phase_report(p, roofline) for p in round_captures(folder, captures)) if r is not None]
    if not reports:
        return None
    return RoundPhases(tuple(reports), compare_calls(latest_calls(reports, latest), baseline, candidate))


def latest_calls(reports: Sequence[PhaseReport], latest: Mapping[str, int] | None) -> pl.DataFrame:
    """Every capture's calls, a row in *latest* only from the last ``latest[shape]`` captures holding it."""
    calls = pl.concat([r.calls.with_columns(pl.lit(i).alias("_capture")) for i, r in enumerate(reports)])
    if not latest:
        return calls.drop("_capture")
    held = calls.select("shape", "_capture").unique()
    kept = [held.filter(pl.col("shape") == shape).sort("_capture").tail(n) for shape, n in latest.items()]
    others = held.filter(~pl.col("shape").is_in(list(latest)))
    return calls.join(pl.concat([*kept, others]), on=["shape", "_capture"], how="semi").drop("_capture")


@dataclass(frozen=True)
class DiffPhases:
    """``diff``'s phases: one comparison per arm found on both sides (or the one arm of each side)."""

    comparisons: tuple[PhaseComparison, ...]
    unmatched: tuple[str, ...]  # arms of one side only, named ("before: x", "after: y")


BEFORE, AFTER = "before", "after"


def diff_phases(before: Sequence[PhaseReport], after: Sequence[PhaseReport]) -> DiffPhases | None:
    """Each side's calls pooled over its captures; an arm on both sides is compared with itself, and one arm a
    side with the other side's one arm (two builds under two labels). None when a side has no stamps."""
    if not before or not after:
        return None
    sides = [pl.concat([r.calls for r in reports]) for reports in (before, after)]
    arms = [s["arm"].unique(maintain_order=True).to_list() for s in sides]
    common = [a for a in arms[0] if a in arms[1]]
    pairs = [(a, a) for a in common] if common else ([(arms[0][0], arms[1][0])] if len(arms[0]) == len(arms[1]) == 1
                                                     else [])  # fmt: skip
    matched = {a for a, _ in pairs}, {b for _, b in pairs}
    unmatched = tuple(f"{side}: {a}" for side, names, used in zip((BEFORE, AFTER), arms, matched, strict=True)
                      for a in names if a not in used)  # fmt: skip
    out = []
    for a, b in pairs:
        tagged = pl.concat([
            sides[0].filter(pl.col("arm") == a).with_columns(pl.lit(BEFORE).alias("arm")),
            sides[1].filter(pl.col("arm") == b).with_columns(pl.lit(AFTER).alias("arm")),
        ])  # fmt: skip
        c = compare_calls(tagged, BEFORE, AFTER)
        out.append(PhaseComparison(a, b, c.deltas))
    return DiffPhases(tuple(out), unmatched)
