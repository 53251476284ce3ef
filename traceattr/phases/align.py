"""Put in-kernel stamps on nsys's time axis: one offset and one skew per capture, checked against every call.

Both clocks count GPU nanoseconds, but nsys reports kernels on its own session
axis, so the stamps need an offset, and a drift between the two (skew) would
tilt it over the capture. Each stamped kernel run gives a window the offset must
fall in: its first CTA cannot begin before nsys's kernel start, its last stamp
cannot come after nsys's kernel end. The skew is the Theil–Sen slope of the
windows' midpoints over the capture (robust to a few odd calls), the offset the
middle of what every window allows at that slope; ``band_ns`` is how wide that is
(the split between the launch and teardown phases is known to ±band/2). Windows
that do not overlap by more than ``TOLERANCE_NS`` (two ticks of the 32 ns
global timer) are refused: the stamps are not of these kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from traceattr.core.callnames import DOMAIN, parse_message
from traceattr.phases.layout import StampError

TOLERANCE_NS = 64.0


@dataclass(frozen=True)
class Alignment:
    """nsys time = (stamp − ref) · (1 + skew) + offset, for one capture."""

    ref_ns: int  # the first stamp (the global timer's value the fit is anchored at)
    offset_ns: float  # nsys time of the first stamp
    skew_ppm: float
    band_ns: float  # width of the offsets every call allows (negative: overlapping only within the tolerance)
    calls: int  # kernel runs the fit used
    worst_ns: float  # the largest violation of a window (0 when all fit)

    def describe(self) -> str:
        return (
            f"stamps aligned with nsys over {self.calls} kernel runs: offset known to ±{max(self.band_ns, 0) / 2:.0f} ns, "
            f"skew {self.skew_ppm:+.2f} ppm"
            + (f", worst window missed by {self.worst_ns:.0f} ns" if self.worst_ns > 0 else "")
        )


def nsys_kernels(kernels: pl.DataFrame) -> pl.DataFrame:
    """(arm, shape, iter, name, start_ns, end_ns) of the kernels inside timed calls of kernels.parquet."""
    prefix = f"{DOMAIN}:"
    names = kernels.select("range_name").unique().drop_nulls()
    parsed = [(n, parse_message(n.removeprefix(prefix))) for n in names["range_name"].to_list()]
    calls = pl.DataFrame(
        [(n, c.backend, c.shape, c.iteration) for n, c in parsed if c is not None],
        schema={"range_name": pl.String, "arm": pl.String, "shape": pl.String, "iter": pl.Int64},
        orient="row",
    )
    return kernels.join(calls, on="range_name").select("arm", "shape", "iter", "name", "start_ns", "end_ns")


def windows(stamps: pl.DataFrame, kernels: pl.DataFrame) -> pl.DataFrame:
    """Per stamped kernel run: its first and last stamp beside nsys's start and end of that kernel."""
    spans = stamps.group_by("arm", "shape", "iter", "kernel").agg(
        pl.col("t_ns").min().alias("first_ns"), pl.col("t_ns").max().alias("last_ns")
    )
    runs = nsys_kernels(kernels)
    matched = spans.join(runs, on=["arm", "shape", "iter"], how="left").filter(
        pl.col("name").is_null()
        | (pl.col("name") == pl.col("kernel"))
        | pl.col("name").str.contains(pl.col("kernel"), literal=True)
    )
    counts = matched.group_by("arm", "shape", "iter", "kernel").agg(pl.col("start_ns").count().alias("n"))
    bad = counts.filter(pl.col("n") != 1)
    if bad.height:
        r = bad.row(0, named=True)
        raise StampError(
            f"stamps of {r['arm']} {r['shape']} call iter {r['iter']}: {r['n']} nsys records of kernel "
            f"{r['kernel']!r} in the call (need exactly 1; {bad.height} such calls)"
        )
    return matched.select("arm", "shape", "iter", "kernel", "first_ns", "last_ns", "start_ns", "end_ns")


def fit(win: pl.DataFrame) -> Alignment:
    """The offset and skew every window allows (:class:`StampError` when none does)."""
    if win.height == 0:
        raise StampError("no stamped kernel run to align")
    ref = int(win["first_ns"].min())  # type: ignore[arg-type]
    x = (win["first_ns"] - ref).to_numpy().astype(float)  # relative first: 2^60 ns do not fit a double's mantissa
    lo = win["start_ns"].to_numpy().astype(float) - x
    hi = win["end_ns"].to_numpy().astype(float) - (win["last_ns"] - ref).to_numpy().astype(float)
    slope = 0.0
    if win.height >= 3 and np.ptp(x) > 0:
        from scipy import stats  # here: scipy.stats takes ~1 s to import, and compare imports this module

        slope = float(stats.theilslopes((lo + hi) / 2, x).slope)
    a_lo, a_hi = float(np.max(lo - slope * x)), float(np.min(hi - slope * x))
    worst = max(0.0, a_lo - a_hi)
    if worst > TOLERANCE_NS:
        i = int(np.argmax(lo - slope * x))
        r = win.row(i, named=True)
        raise StampError(
            f"stamps of {r['arm']} {r['shape']} call iter {r['iter']} ({r['kernel']}) cannot share one offset with "
            f"the other calls: windows miss each other by {worst:.0f} ns (> {TOLERANCE_NS:.0f} ns); "
            "are these the stamps of this capture?"
        )
    return Alignment(ref, (a_lo + a_hi) / 2, slope * 1e6, a_hi - a_lo, win.height, worst)


def aligned(al: Alignment) -> pl.Expr:
    """The nsys time of column ``t_ns`` under *al* (float ns)."""
    rel = (pl.col("t_ns") - al.ref_ns).cast(pl.Float64)
    return rel * (1 + al.skew_ppm * 1e-6) + al.offset_ns
