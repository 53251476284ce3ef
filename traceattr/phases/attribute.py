"""A kernel's time by phase: per CTA, per SM, and the median call's critical path.

Phases of one CTA (times on nsys's axis, :mod:`traceattr.phases.align`):
``launch`` (nsys's kernel start → the CTA's first stamp: launch, and waiting for
an SM), then one phase per later boundary, named after the boundary it ends at
(``tile_loaded``: first stamp → the first tile in registers, …), then
``teardown`` (the CTA's last stamp → nsys's kernel end: the other CTAs' tails,
exit). A kernel run's critical path is its last CTA to finish: its phases add up
to the kernel's nsys duration. A call's phases are its kernels' critical paths in
launch order, named ``kernel:phase``, with a ``gap`` before each kernel after the
first (the previous kernel's end → its start), so they add up to the call's nsys
span. The median call is the per-phase median over calls, each with the
distribution-free 95% interval of :func:`traceattr.core.precision.median_interval`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from traceattr.core.precision import median_interval
from traceattr.phases.align import Alignment, aligned

LAUNCH = "launch"
TEARDOWN = "teardown"
GAP = "gap"
RUN = ["arm", "shape", "iter", "kernel"]
CTA = [*RUN, "cta"]
CALL = ["arm", "shape", "iter"]


def cta_phases(stamps: pl.DataFrame, win: pl.DataFrame, al: Alignment) -> pl.DataFrame:
    """One row per (kernel run, CTA, phase): sm, order, phase, start_ns (from the kernel's start), duration_ns."""
    t = (
        stamps.join(win.select(*RUN, "start_ns", "end_ns"), on=RUN)
        .with_columns(aligned(al).alias("t"))
        .sort([*CTA, "boundary"])
        .with_row_index("_r")
    )
    # Sorted, a CTA's stamps are contiguous from boundary 0 (the reader writes every boundary of every CTA), so
    # the stamp before is the row before and a CTA's last is the row before the next boundary 0: no window
    # over five keys, and one numeric sort puts each teardown after its CTA (a million stamps: 3 s → under 1 s).
    first = pl.col("boundary") == 0
    inner = t.select(
        *CTA, "sm", pl.col("boundary").alias("order"),
        pl.when(first).then(pl.lit(LAUNCH)).otherwise(pl.col("name")).alias("phase"),
        pl.when(first).then(pl.col("start_ns").cast(pl.Float64)).otherwise(pl.col("t").shift(1)).alias("from"),
        "t", "start_ns", pl.col("_r").cast(pl.Float64),
    )  # fmt: skip
    last = t.filter(pl.col("boundary").shift(-1, fill_value=0) == 0).select(
        *CTA, "sm", (pl.col("boundary") + 1).alias("order"), pl.lit(TEARDOWN).alias("phase"),
        pl.col("t").alias("from"),  # the CTA's latest stamp: stamps only rise within a CTA (layout clamps them)
        pl.col("end_ns").cast(pl.Float64).alias("t"), "start_ns", (pl.col("_r").cast(pl.Float64) + 0.5).alias("_r"),
    )  # fmt: skip
    both = pl.concat([inner, last]).sort("_r")
    return both.select(
        *CTA, "sm", "order", "phase",
        (pl.col("from") - pl.col("start_ns")).alias("start_ns"), (pl.col("t") - pl.col("from")).alias("duration_ns"),
    )  # fmt: skip


def critical_path(phases: pl.DataFrame) -> pl.DataFrame:
    """Each kernel run's last CTA to finish (the one whose teardown is shortest): its phases."""
    teardown = phases.filter(pl.col("phase") == TEARDOWN)
    last = teardown.sort([*RUN, "duration_ns", "cta"]).group_by(RUN, maintain_order=True).first().select(*RUN, "cta")
    return phases.join(last, on=CTA).sort([*RUN, "order"])


def call_phases(phases: pl.DataFrame, win: pl.DataFrame) -> pl.DataFrame:
    """One row per (call, phase): the critical paths of the call's kernels in launch order, with the gaps."""
    crit = critical_path(phases)
    runs = win.select(*RUN, "start_ns", "end_ns").sort([*CALL, "start_ns"])
    runs = runs.with_columns(
        pl.col("start_ns").rank("ordinal").over(CALL).cast(pl.Int64).alias("k"),
        (pl.col("start_ns") - pl.col("end_ns").shift(1).over(CALL)).alias("gap_ns"),
    )
    body = crit.join(runs.select(*RUN, "k"), on=RUN).select(
        *CALL, "k", "order", (pl.col("kernel") + ":" + pl.col("phase")).alias("phase"), "duration_ns"
    )
    gaps = runs.filter(pl.col("gap_ns").is_not_null()).select(
        *CALL, "k", pl.lit(-1, pl.Int64).alias("order"), (pl.lit(GAP + "→") + pl.col("kernel")).alias("phase"),
        pl.col("gap_ns").cast(pl.Float64).alias("duration_ns"),
    )  # fmt: skip
    return pl.concat([body.cast({"order": pl.Int64}), gaps]).sort([*CALL, "k", "order"])


def call_spans(win: pl.DataFrame) -> pl.DataFrame:
    """(arm, shape, iter, span_ns): nsys's first kernel start → last kernel end of each stamped call."""
    return win.group_by(CALL).agg((pl.col("end_ns").max() - pl.col("start_ns").min()).alias("span_ns"))


@dataclass(frozen=True)
class PhaseMedian:
    """One phase of the median call of an (arm, shape)."""

    arm: str
    shape: str
    position: int  # its place on the critical path
    phase: str
    median_ns: float
    low_ns: float  # 95% interval of the median
    high_ns: float
    calls: int


@dataclass(frozen=True)
class MedianCall:
    """An (arm, shape)'s median call: its phases, and how their medians add up against the median nsys span."""

    arm: str
    shape: str
    phases: tuple[PhaseMedian, ...]
    span_ns: float  # median nsys span of the stamped calls
    calls: int
    typical_iter: int  # the call whose span is nearest that median (the one drawn CTA by CTA)

    @property
    def phase_sum_ns(self) -> float:
        return sum(p.median_ns for p in self.phases)

    @property
    def sum_error(self) -> float:
        """(Σ phase medians) / median span − 1: the median call's phases against its nsys duration."""
        return self.phase_sum_ns / self.span_ns - 1.0 if self.span_ns else float("nan")


def median_calls(calls: pl.DataFrame, spans: pl.DataFrame) -> tuple[MedianCall, ...]:
    """Per (arm, shape), the per-phase medians over calls (phases in critical-path order)."""
    order = (
        calls.group_by("arm", "shape", "phase")
        .agg(pl.col("k").min() * 1000 + pl.col("order").min())
        .rename({"k": "position"})
    )
    out = []
    for (arm, shape), part in (
        calls.join(order, on=["arm", "shape", "phase"]).sort("position").group_by(["arm", "shape"], maintain_order=True)
    ):
        rows = []
        for (phase, position), p in part.group_by(["phase", "position"], maintain_order=True):
            v = p["duration_ns"].to_numpy()
            lo, hi = median_interval(v)
            rows.append(
                PhaseMedian(str(arm), str(shape), int(position), str(phase), float(np.median(v)), lo, hi, len(v))
            )
        own = spans.filter((pl.col("arm") == arm) & (pl.col("shape") == shape)).sort("iter")
        s = own["span_ns"].to_numpy().astype(float)
        typical = int(own["iter"][int(np.argmin(np.abs(s - np.median(s))))])
        out.append(MedianCall(str(arm), str(shape), tuple(rows), float(np.median(s)), len(s), typical))
    return tuple(out)


def per_sm(phases: pl.DataFrame) -> pl.DataFrame:
    """Per (arm, shape, kernel, sm): CTAs per call and the median over calls of their stamped time on that SM."""
    stamped = phases.filter(~pl.col("phase").is_in([LAUNCH, TEARDOWN]))
    per_call = stamped.group_by([*RUN, "sm"]).agg(
        pl.col("cta").n_unique().alias("ctas"), pl.col("duration_ns").sum().alias("busy_ns")
    )
    return (
        per_call.group_by("arm", "shape", "kernel", "sm")
        .agg(pl.col("ctas").median(), pl.col("busy_ns").median())
        .sort("arm", "shape", "kernel", "sm")
    )
