"""The roofline knows its bound: FLOPs and bytes per call from the shape, both peaks, the share of the longer bound."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import traceattr
from traceattr.analysis.pipeline import analyse
from traceattr.analysis.roofline import call_flops, compute_peak
from traceattr.analysis.summary import summarize
from traceattr.core.shapes import parse_shape
from traceattr.present.formats import ABOVE_PEAK, roofline_share

EXAMPLES = Path(__file__).parents[1] / "examples" / "traces"
H200_BANDWIDTH = 4.814304e12  # what nsys's TARGET_INFO_GPU says for the examples' H200
H200_BF16 = 989e12  # NVIDIA H200 SXM datasheet, dense


@pytest.fixture(scope="module")
def fa2_fa3() -> pl.DataFrame:
    return analyse(traceattr.open(EXAMPLES / "h200_mla_fa2_fa3.sqlite").attribute()).summary


def _row(summary: pl.DataFrame, shape: str, backend: str) -> dict:
    return summary.filter((pl.col("shape") == shape) & (pl.col("backend") == backend)).row(0, named=True)


def test_compute_bound_shape_by_hand(fa2_fa3: pl.DataFrame) -> None:
    # q8_ctx32768_h96: 96 heads × 8 query tokens × 32,768 cached tokens, QK over 576 dims and PV over 512
    fa3 = _row(fa2_fa3, "q8_ctx32768_h96", "fa3")
    flops = 2 * 96 * 8 * 32768 * (576 + 512)
    nbytes = 32768 * 576 * 2 + 8 * 96 * (576 + 512) * 2  # KV once (bf16) + Q read + O written
    assert (fa3["flops"], fa3["bytes"]) == (flops, nbytes)
    compute_s, memory_s = flops / H200_BF16, nbytes / H200_BANDWIDTH  # 55.4 µs vs 8.2 µs
    assert compute_s > memory_s and fa3["bound"] == "compute"
    median_s = fa3["median_us"] * 1e-6
    assert fa3["roofline"] == pytest.approx(compute_s / median_s)
    assert flops / median_s == pytest.approx(533e12, rel=0.01)  # fa3 runs at ~530 TFLOP/s …
    assert fa3["roofline"] == pytest.approx(0.54, abs=0.005)  # … ~54% of the compute bound, not 8%


def test_memory_bound_shape_by_hand(fa2_fa3: pl.DataFrame) -> None:
    # q1_ctx131072 (16 heads): one query token reads 131,072 cached tokens
    fa3 = _row(fa2_fa3, "q1_ctx131072", "fa3")
    flops = 2 * 16 * 1 * 131072 * (576 + 512)
    nbytes = 131072 * 576 * 2 + 1 * 16 * (576 + 512) * 2
    compute_s, memory_s = flops / H200_BF16, nbytes / H200_BANDWIDTH  # 4.6 µs vs 31.4 µs
    assert (fa3["flops"], fa3["bytes"], fa3["bound"]) == (flops, nbytes, "memory")
    assert memory_s > compute_s
    assert fa3["roofline"] == pytest.approx(memory_s / (fa3["median_us"] * 1e-6))
    assert fa3["roofline"] == pytest.approx(0.39, abs=0.005)


def test_flops_follow_batch_pattern_dtype_and_dcp() -> None:
    assert call_flops(parse_shape("q4_ctx1000_h8_b3")) == 2 * 8 * 3 * 4 * 1000 * 1088
    ragged = parse_shape("q4_ctx1000_h8_b3_ragged")  # requests of 1, 2 and 4 tokens
    assert call_flops(ragged) == 2 * 8 * sum(q * 1000 for q in ragged.q_lens()) * 1088
    assert call_flops(parse_shape("q8_ctx900k_dcp8")) == call_flops(parse_shape("q8_ctx112500"))
    assert call_flops(parse_shape("q8_ctx900k_fp8")) == call_flops(parse_shape("q8_ctx900k"))  # the dtype sets the peak


def test_peaks_name_their_source() -> None:
    h200, b200 = compute_peak("NVIDIA H200"), compute_peak("NVIDIA B200")
    assert h200 is not None and h200.per_dtype == {"bf16": 989e12, "fp8": 1979e12} and "H200" in h200.source
    assert b200 is not None and b200.per_dtype == {"bf16": 2.25e15, "fp8": 4.5e15} and "B200" in b200.source
    assert compute_peak("NVIDIA GeForce RTX 3060") is None and compute_peak(None) is None
    assert "989 TFLOP/s" in h200.describe() and "datasheet" in h200.describe()


def test_above_the_bound_is_flagged_not_printed() -> None:
    assert roofline_share(0.538) == "54%" and roofline_share(None) == ""
    assert roofline_share(1.2) == ABOVE_PEAK and "%" not in ABOVE_PEAK


@pytest.mark.parametrize("name", ["h200_mla_fa2_fa3", "h200_mla_levers", "h200_mla_sweep"])
def test_every_shipped_example_has_bound_and_share(name: str) -> None:
    summary = analyse(traceattr.open(EXAMPLES / f"{name}.sqlite").attribute()).summary
    assert summary["bound"].is_in(["memory", "compute"]).all() and summary["roofline"].is_not_null().all()
    assert (summary["roofline"] < 1).all()


def test_unknown_gpu_gives_no_share() -> None:
    # bytes alone would call a compute-bound shape inefficient: without a compute peak there is no share
    table = traceattr.open(EXAMPLES / "h200_mla_fa2_fa3.sqlite").calls()
    summary = summarize(table, H200_BANDWIDTH)
    assert summary["bound"].is_null().all() and summary["roofline"].is_null().all()
    assert summary["flops"].is_not_null().all()
