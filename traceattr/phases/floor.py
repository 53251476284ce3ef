"""The fixed-cost floor: the floor probes' nsys times, and when a row is fixed-cost bound.

The runner (:mod:`traceattr.runner.stamps`) launches an instrumented arm's probes
after its shape's timed loop, each rep behind the L2 flush and alone in a range
``traceattr:floor arm=… probe=… shape=… rep=N``: ``empty`` (an empty kernel with the
real grid: launch + exit), ``one_tile`` (the kernel on one tile of KV, with its
merge: the smallest call it can make) and ``grid_tile`` (the call's own grid and merge,
each program on one tile: what the call costs whatever its context length). A rep's
time is the sum of nsys's durations of the kernels in its range: host launch time never counts, nor the gaps between a
probe's kernels (no hold runs before a probe, so those gaps are the host's: on the
H200 a Python launch left the GPU idle ~20 µs between split and reduce kernel).

A row is **fixed-cost bound** when its median call is within ``FIXED_COST_FACTOR``
of its arm's floor on that row, ``grid_tile`` where the arm has it (one program's tile
leaves out the grid's own costs: a reduce over every split, the last of many CTAs),
else ``one_tile``: most of its time is what a call of that geometry costs whatever
the context length, and no bandwidth share says more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from traceattr.core.callnames import DOMAIN
from traceattr.core.precision import median_interval

FIXED_COST_FACTOR = 1.5
FIXED_COST_PROBES = ("grid_tile", "one_tile")  # the floor a verdict is against: the first an arm has
FLOOR_RANGE = re.compile(
    rf"^{DOMAIN}:floor arm=(?P<arm>\S+) probe=(?P<probe>\S+) shape=(?P<shape>\S+)(?: rep=(?P<rep>\d+))?$"
)


@dataclass(frozen=True)
class Floor:
    """One probe of one arm on one shape: its median nsys time and the 95% interval."""

    arm: str
    shape: str
    probe: str
    median_ns: float
    low_ns: float
    high_ns: float
    reps: int


def floors(kernels: pl.DataFrame) -> tuple[Floor, ...]:
    """The floor probes in kernels.parquet's floor ranges (a range without ``rep=``: one kernel per rep)."""
    names = kernels.select("range_name").unique().drop_nulls()["range_name"].to_list()
    keys = {n: m for n in names if (m := FLOOR_RANGE.match(n))}
    if not keys:
        return ()
    table = pl.DataFrame(
        [(n, m["arm"], m["probe"], m["shape"], int(m["rep"]) if m["rep"] else -1) for n, m in keys.items()],
        schema={"range_name": pl.String, "arm": pl.String, "probe": pl.String, "shape": pl.String, "rep": pl.Int64},
        orient="row",
    )
    runs = kernels.join(table, on="range_name").with_columns(
        pl.when(pl.col("rep") >= 0).then(pl.col("rep")).otherwise(pl.col("start_ns").rank("ordinal").over("range_name"))
        .cast(pl.Int64).alias("rep")
    )  # fmt: skip
    spans = runs.group_by("arm", "shape", "probe", "rep").agg((pl.col("end_ns") - pl.col("start_ns")).sum().alias("ns"))
    out = []
    for (arm, shape, probe), part in spans.sort("arm", "shape", "probe").group_by(
        ["arm", "shape", "probe"], maintain_order=True
    ):
        v = part["ns"].to_numpy().astype(float)
        lo, hi = median_interval(v)
        out.append(Floor(str(arm), str(shape), str(probe), float(np.median(v)), lo, hi, len(v)))
    return tuple(out)


@dataclass(frozen=True)
class FixedCost:
    """A row's median call against its floor (the probe named)."""

    arm: str
    shape: str
    call_ns: float
    floor_ns: float
    probe: str  # the floor's probe (FIXED_COST_PROBES)
    factor: float = FIXED_COST_FACTOR

    @property
    def times_floor(self) -> float:
        return self.call_ns / self.floor_ns

    @property
    def bound(self) -> bool:
        return self.times_floor <= self.factor

    def describe(self) -> str:
        verdict = "fixed-cost bound" if self.bound else "not fixed-cost bound"
        return (
            f"{verdict}: {self.call_ns / 1e3:.2f} µs = {self.times_floor:.2f}× the {self.probe} floor "
            f"{self.floor_ns / 1e3:.2f} µs (bound within {self.factor:g}×)"
        )


def fixed_cost(arm: str, shape: str, call_ns: float, found: tuple[Floor, ...]) -> FixedCost | None:
    """The verdict of *arm* on *shape* against the first of ``FIXED_COST_PROBES`` it has, or None."""
    mine = {f.probe: f for f in found if f.arm == arm and f.shape == shape}
    for probe in FIXED_COST_PROBES:
        if probe in mine:
            return FixedCost(arm, shape, call_ns, mine[probe].median_ns, probe)
    return None
