"""A run folder's phases, and a round's phase deltas between its two arms."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from traceattr.core.precision import median_interval
from traceattr.core.runfolder import KERNELS
from traceattr.phases.align import Alignment, fit, windows
from traceattr.phases.attribute import MedianCall, call_phases, call_spans, cta_phases, median_calls, per_sm
from traceattr.phases.floor import Floor, floors
from traceattr.phases.layout import StampError, read_stamps

# a round's capture run folders: capture-N (runfolder.capture_folder), round-N before the rename
CAPTURE_DIR = re.compile(r"(?:capture|round)-\d+")


@dataclass(frozen=True)
class PhaseReport:
    """One capture's stamped calls: alignment, per-CTA and per-call phases, median calls, floors."""

    folder: Path
    alignment: Alignment
    ctas: pl.DataFrame  # attribute.cta_phases
    calls: pl.DataFrame  # attribute.call_phases
    sms: pl.DataFrame  # attribute.per_sm
    medians: tuple[MedianCall, ...]
    floors: tuple[Floor, ...]
    clamped: int  # stamps raised to the one before them (reordered within a CTA)


def phase_report(folder: Path) -> PhaseReport | None:
    """The phases of run folder *folder*, or None when it holds no stamps."""
    stamps = read_stamps(folder)
    if stamps.height == 0:
        return None
    kernels_path = folder / f"{KERNELS}.parquet"
    if not kernels_path.is_file():
        raise StampError(f"{folder}: has stamps but no {kernels_path.name} to align them with")
    kernels = pl.read_parquet(kernels_path, columns=["name", "start_ns", "end_ns", "range_name"])
    win = windows(stamps, kernels)
    al = fit(win)
    ctas = cta_phases(stamps, win, al)
    calls = call_phases(ctas, win)
    return PhaseReport(
        folder, al, ctas, calls, per_sm(ctas), median_calls(calls, call_spans(win)), floors(kernels),
        int(stamps["clamped"].sum()),
    )  # fmt: skip


@dataclass(frozen=True)
class PhaseDelta:
    """One phase of one row: baseline and candidate medians over all captures' calls, and the change."""

    shape: str
    phase: str
    baseline_ns: float
    candidate_ns: float
    low_ns: float  # the change's interval: the medians' 95% intervals combined (conservative)
    high_ns: float

    @property
    def delta_ns(self) -> float:
        return self.candidate_ns - self.baseline_ns

    @property
    def moved(self) -> bool:
        """The interval excludes no change."""
        return self.low_ns > 0 or self.high_ns < 0


def round_captures(folder: Path) -> tuple[str, str, tuple[Path, ...]]:
    """(baseline, candidate, capture folders) of a round folder (its receipt.json names the arms)."""
    receipt = folder / "receipt.json"
    try:
        r = json.loads(receipt.read_text(encoding="utf-8"))
        baseline, candidate = str(r["baseline"]), str(r["candidate"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise StampError(f"{receipt}: cannot name the round's arms ({type(err).__name__}: {err})") from None
    found = [p for p in folder.iterdir() if p.is_dir() and CAPTURE_DIR.fullmatch(p.name)]
    return baseline, candidate, tuple(sorted(found, key=lambda p: int(p.name.rsplit("-", 1)[1])))


def round_deltas(reports: list[PhaseReport], baseline: str, candidate: str) -> tuple[PhaseDelta, ...]:
    """Per row and phase, the candidate's median minus the baseline's, pooling every capture's calls.

    Phases are matched by name; one only an arm has (the reduce kernel's) counts as 0 for the other.
    """
    calls = pl.concat([r.calls for r in reports]).filter(pl.col("arm").is_in([baseline, candidate]))
    out = []
    for (shape,), row in calls.group_by(["shape"], maintain_order=True):
        for phase in row.sort("k", "order")["phase"].unique(maintain_order=True).to_list():
            b, c = (_median(row, arm, phase) for arm in (baseline, candidate))
            out.append(PhaseDelta(str(shape), phase, b[0], c[0], c[1] - b[2], c[2] - b[1]))
    return tuple(out)


def _median(calls: pl.DataFrame, arm: str, phase: str) -> tuple[float, float, float]:
    """(median, low, high) of *arm*'s *phase* over *calls*; zeros for a phase the arm does not have."""
    v = calls.filter((pl.col("arm") == arm) & (pl.col("phase") == phase))["duration_ns"].to_numpy()
    if len(v) == 0:
        return 0.0, 0.0, 0.0
    lo, hi = median_interval(v)
    return float(np.median(v)), lo, hi
