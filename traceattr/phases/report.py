"""A run folder's phases: one record (:class:`PhaseReport`) every surface renders (docs/phases.md)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from traceattr.core.runfolder import KERNELS, stamp_folder
from traceattr.phases.align import Alignment, fit, windows
from traceattr.phases.attribute import RUN, MedianCall, call_phases, call_spans, cta_phases, median_calls, per_sm
from traceattr.phases.floor import FixedCost, Floor, fixed_cost, floors
from traceattr.phases.layout import StampError, read_stamps

# a run folder's roofline, as compare computes it: given ``shape, median_us`` rows of calls in that folder, the same
# rows with ``bound`` (memory | compute) and ``roofline`` (the share of that bound reached; null where unknown).
# The caller's (traceattr.present.phases.roofline_of): this layer does not reach the analysis.
Roofline = Callable[[Path, pl.DataFrame], pl.DataFrame]


@dataclass(frozen=True)
class RowBound:
    """What bounds an (arm, shape): its floor probes, the fixed-cost verdict, and the roofline compare shows."""

    arm: str
    shape: str
    floors: tuple[Floor, ...]  # by probe name
    fixed: FixedCost | None  # None: no tile probe (floor.FIXED_COST_PROBES)
    roofline_share: float | None  # the share of the applying roofline bound the median call reaches; None: unknown
    bound: str | None = None  # which bound applies: memory | compute (analysis.roofline); None: unknown


@dataclass(frozen=True)
class PhaseReport:
    """One capture's stamped calls: alignment, per-CTA and per-call phases, median calls, floors and bounds."""

    folder: Path
    alignment: Alignment
    runs: pl.DataFrame  # align.windows: per stamped kernel run, nsys's start_ns and end_ns
    ctas: pl.DataFrame  # attribute.cta_phases
    calls: pl.DataFrame  # attribute.call_phases
    sms: pl.DataFrame  # attribute.per_sm
    medians: tuple[MedianCall, ...]
    floors: tuple[Floor, ...]
    clamped: int  # stamps raised to the one before them (reordered within a CTA)
    bounds: tuple[RowBound, ...] = ()  # one per median call, in its order

    def bound(self, m: MedianCall) -> RowBound | None:
        return next((b for b in self.bounds if b.arm == m.arm and b.shape == m.shape), None)


def natural(name: str) -> tuple[tuple[int, str], ...]:
    """A shape name's sort key with its numbers as numbers: q1_ctx8k before q1_ctx32k."""
    return tuple((int(p), "") if p.isdigit() else (-1, p) for p in re.split(r"(\d+)", name) if p)


def phase_report(folder: Path, roofline: Roofline | None = None) -> PhaseReport | None:
    """The phases of run folder *folder* (or of its trace.sqlite), or None when it holds no stamps.

    *roofline*: the folder's roofline, for each row's share of it (none without it)."""
    folder = stamp_folder(folder)
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
    # a row's arms side by side, rows by their numbers (q1_ctx8k before q1_ctx32k)
    medians = tuple(sorted(median_calls(calls, call_spans(win)), key=lambda m: (natural(m.shape), m.arm)))
    found = floors(kernels)
    return PhaseReport(
        folder, al, win.sort([*RUN[:3], "start_ns"]), ctas, calls, per_sm(ctas), medians, found,
        int(stamps["clamped"].sum()), _bounds(folder, medians, found, roofline),
    )  # fmt: skip


def _bounds(
    folder: Path, medians: tuple[MedianCall, ...], found: tuple[Floor, ...], roofline: Roofline | None
) -> tuple[RowBound, ...]:
    calls = pl.DataFrame({"shape": [m.shape for m in medians], "median_us": [m.span_ns / 1e3 for m in medians]},
                         schema={"shape": pl.String, "median_us": pl.Float64})  # fmt: skip
    roof = roofline(folder, calls) if roofline is not None and medians else None
    out = []
    for i, m in enumerate(medians):
        probes = tuple(sorted((f for f in found if f.arm == m.arm and f.shape == m.shape), key=lambda f: f.probe))
        share, bound = (None, None) if roof is None else (roof["roofline"][i], roof["bound"][i])
        out.append(RowBound(m.arm, m.shape, probes, fixed_cost(m.arm, m.shape, m.span_ns, found), share, bound))
    return tuple(out)


def cta_timeline(report: PhaseReport, m: MedianCall) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The call *m* draws CTA by CTA (its typical call): (kernels, phases), on one axis from the call's first
    kernel start, in ns. kernels: ``kernel, x0_ns, duration_ns`` in launch order; phases: ``kernel, cta, sm,
    order, phase, x0_ns, duration_ns`` per CTA in program order."""
    call = (pl.col("arm") == m.arm) & (pl.col("shape") == m.shape) & (pl.col("iter") == m.typical_iter)
    runs = report.runs.filter(call).sort("start_ns")
    t0 = runs["start_ns"].min()
    kernels = runs.select(
        "kernel", (pl.col("start_ns") - t0).cast(pl.Float64).alias("x0_ns"),
        (pl.col("end_ns") - pl.col("start_ns")).cast(pl.Float64).alias("duration_ns"),
    )  # fmt: skip
    phases = (
        report.ctas.filter(call)
        .join(runs.select("kernel", (pl.col("start_ns") - t0).cast(pl.Float64).alias("_k0")), on="kernel")
        .select("kernel", "cta", "sm", "order", "phase", (pl.col("_k0") + pl.col("start_ns")).alias("x0_ns"),
                "duration_ns")
        .join(kernels.with_row_index("_k").select("kernel", "_k"), on="kernel")
        .sort("_k", "cta", "order")
        .drop("_k")
    )  # fmt: skip
    return kernels, phases
