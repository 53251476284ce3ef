"""What the range metrics are made of, on both paths: the per-op facts, and which sums need a running sum."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from traceattr.attribution.roles import ROLES
from traceattr.core.keys import first_of_id

STREAM = pl.col("device_id").cast(pl.Int64) * (1 << 32) + pl.col("stream_id")  # one key per (device, stream)


def op_facts(gpu_ops: pl.DataFrame, placement: pl.DataFrame) -> pl.DataFrame:
    """The few per-op values the range metrics need, in op_id order (row == op_id)."""
    # nsys's NumGPUOps counts launch calls (a graph launch of 5 kernels is 1);
    # correlation ids repeat across processes, so a launch is (process, id).
    # Every op of one launch reaches the same ranges (it joins the same runtime
    # rows), so a range's distinct launches are its ops that are their launch's first.
    pid = gpu_ops["global_pid"]
    if pid.null_count() == pid.len() or (pid.null_count() == 0 and pid.min() == pid.max()):  # one process
        first = first_of_id(gpu_ops["correlation_id"])
    else:
        first = gpu_ops.select(pl.struct("global_pid", "correlation_id").is_first_distinct()).to_series()
    return gpu_ops.select(
        "start",
        "end",
        (pl.col("kind") == "kernel").alias("is_kernel"),
        STREAM.alias("stream"),
        "device_id",
    ).hstack([first.alias("first_of_launch"), placement["role"]])


@dataclass(frozen=True)
class SumPlan:
    """Which per-range sums need a running sum over the ops of *rows*.

    A flag set on every op sums to the range's op count, a role no op has to zero, and the only role
    present to gpu_sum_ns: most traces have one op per launch, only kernels and few roles.
    """

    every_launch: bool
    every_kernel: bool
    present: frozenset[str]

    @classmethod
    def of(cls, rows: pl.DataFrame) -> SumPlan:
        present = frozenset(rows["role"].unique().drop_nulls().to_list())
        return cls(bool(rows["first_of_launch"].all()), bool(rows["is_kernel"].all()), present)

    def summed(self, dur: pl.Expr) -> dict[str, pl.Expr]:
        """The sums beyond gpu_sum_ns and busy_ns that need a running sum, as per-op values."""
        out: dict[str, pl.Expr] = {}
        if not self.every_launch:
            out["gpu_ops"] = pl.col("first_of_launch")
        if not self.every_kernel:
            out |= {"kernels": pl.col("is_kernel"), "kernel_sum_ns": dur * pl.col("is_kernel")}
        if len(self.present) > 1:
            out |= {f"{role}_sum_ns": dur * (pl.col("role") == role) for role in ROLES if role in self.present}
        return out

    def derived(self, count: pl.Series, gpu_sum: pl.Series) -> dict[str, pl.Series]:
        """The other sums, from each range's op count and gpu_sum_ns."""
        out: dict[str, pl.Series] = {}
        if self.every_launch:
            out["gpu_ops"] = count
        if self.every_kernel:
            out |= {"kernels": count, "kernel_sum_ns": gpu_sum}
        zero = pl.zeros(count.len(), dtype=pl.Int64, eager=True)
        for role in ROLES:
            if len(self.present) <= 1 or role not in self.present:
                out[f"{role}_sum_ns"] = gpu_sum if self.present == {role} else zero
        return out
