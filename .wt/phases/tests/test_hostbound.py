"""Host-bound calls: no queue wait before the first op and idle gaps inside the call (constructed calls)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import traceattr
from tests.synth.builder import TraceBuilder
from traceattr.analysis.calls import calls
from traceattr.analysis.hostbound import host_bound, host_bound_calls

SPLIT = "void flashinfer::BatchPrefillWithPagedKVCacheKernel<(flashinfer::MaskMode)1>(Params)"
MERGE = "void flashinfer::MergeStatesKernel<8u, 16u, 8u, 4u, __nv_bfloat16, __nv_bfloat16>(Params)"
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<unsigned char>>(int, T, U)"


def _calls(rows: list[tuple[str, str, int, int, int, int]]) -> pl.DataFrame:
    return pl.DataFrame(
        rows,
        schema={"round": pl.Int64, "backend": pl.String, "shape": pl.Int64, "gpu_span_ns": pl.Int64,
                "gap_ns": pl.Int64, "queue_wait_ns": pl.Int64},
        orient="row",
    ).with_columns(pl.col("shape").cast(pl.String))  # fmt: skip


def test_a_call_is_host_bound_only_with_no_queue_wait_and_real_gaps() -> None:
    calls = _calls(
        [
            (1, "s4", 8, 71_104, 52_128, 0),  # waited for its merge's launch: the H200 capture's numbers
            (1, "s4", 8, 63_903, 3_840, 388_546),  # queued behind the hold: its gap is the kernels' own
            (1, "s4", 8, 63_903, 3_840, 0),  # no queue wait, but a gap of 6% of the span: kernels, not host
            (1, "fa3", 8, 24_288, 0, 0),  # one kernel: no gap, never host-bound
        ]
    )
    assert calls.select(host_bound())["queue_wait_ns"].to_list() == [True, False, False, False]


def test_counted_per_arm_and_capture() -> None:
    calls = _calls(
        [
            (1, "s4", 8, 78_144, 59_296, 0),
            (1, "s4", 8, 126_527, 107_711, 0),
            (1, "fa3", 8, 24_000, 0, 0),
            (2, "s4", 8, 62_000, 2_500, 300_000),
            (2, "s4", 8, 62_500, 2_400, 310_000),
            (2, "fa3", 8, 24_100, 0, 280_000),
        ]
    )
    out = host_bound_calls(calls, by=("round", "backend", "shape"))
    assert out.columns == ["round", "backend", "shape", "calls", "host_bound", "share", "gap_us_median"]
    rows = {(r["round"], r["backend"]): r for r in out.iter_rows(named=True)}
    assert rows[(1, "s4")]["host_bound"] == 2 and rows[(1, "s4")]["share"] == 1.0
    assert rows[(1, "s4")]["gap_us_median"] == pytest.approx((59.296 + 107.711) / 2)
    assert rows[(1, "fa3")]["host_bound"] == 0 and rows[(1, "fa3")]["gap_us_median"] is None
    assert rows[(2, "s4")]["host_bound"] == 0 and rows[(2, "fa3")]["share"] == 0.0


def test_missing_queue_columns_read_as_zero_and_empty_input() -> None:
    calls = _calls([(1, "s4", 8, 70_000, 50_000, 0)]).with_columns(pl.lit(None, pl.Int64).alias("queue_wait_ns"))
    assert host_bound_calls(calls)["host_bound"].to_list() == [1]
    empty = host_bound_calls(calls.clear())
    assert empty.height == 0 and empty.schema["share"] == pl.Float64


def test_on_calls_from_a_constructed_trace(tmp_path: Path) -> None:
    """Through the real pipeline: tests/synth builds a trace, analysis.calls reads its calls, queue wait and gaps."""
    b = TraceBuilder()
    dom = b.domain("traceattr", tid=1)
    b.launch(tid=1, start=50, end=80, kernel=FILL, gpu_start=100, gpu_end=900)  # the stream's earlier work
    # iter 0: the stream is free when the chunk kernel is launched, and the merge is launched 30 µs after the
    # chunk kernel ends: the call waited for its own launch
    b.push_range(tid=1, start=1_000, end=60_000, message="backend=s4 shape=q1_ctx8k arm=B iter=0", domain=dom)
    b.launch(tid=1, start=1_100, end=1_300, kernel=SPLIT, gpu_start=5_000, gpu_end=20_000)
    b.launch(tid=1, start=49_000, end=49_200, kernel=MERGE, gpu_start=50_000, gpu_end=55_000)
    # iter 1: queued behind earlier work (a hold): both kernels were enqueued before the stream reached them
    b.launch(tid=1, start=70_000, end=70_100, kernel=FILL, gpu_start=70_500, gpu_end=200_000)
    b.push_range(tid=1, start=71_000, end=80_000, message="backend=s4 shape=q1_ctx8k arm=B iter=1", domain=dom)
    b.launch(tid=1, start=71_100, end=71_300, kernel=SPLIT, gpu_start=200_500, gpu_end=215_000)
    b.launch(tid=1, start=72_000, end=72_200, kernel=MERGE, gpu_start=216_000, gpu_end=221_000)
    path = b.write(tmp_path / "t.sqlite", gpu_name="NVIDIA H200", cc=(9, 0))
    table = calls(traceattr.open(path).attribute()).sort("iter")
    assert table["queue_wait_ns"].to_list()[0] == 0 and table["queue_wait_ns"].to_list()[1] > 0
    assert table.select(host_bound()).to_series().to_list() == [True, False]
    out = host_bound_calls(table)
    assert out.select("backend", "calls", "host_bound").row(0) == ("s4", 2, 1)
    assert out["gap_us_median"].item() == pytest.approx(30.0)
