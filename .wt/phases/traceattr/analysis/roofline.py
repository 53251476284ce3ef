"""The roofline of a decode call: the bytes and FLOPs its shape needs, the GPU's peaks, and which bound applies.

A call of shape S on a GPU with bandwidth B (bytes/s) and dense peak P
(FLOP/s, for S's dtype) cannot take less than ``max(bytes/B, flops/P)``:
the *memory* bound when the first term is larger, the *compute* bound when
the second is. ``roofline`` (:mod:`traceattr.analysis.summary`) is that
bound over the measured median, the share of the applying bound reached;
a share above 1 means a peak or the shape is wrong (an arm that moves other
bytes than its shape says), and is flagged where it is shown.

FLOPs of MLA decode (one latent KV head shared by every query head): per query
head, query token and cached token it attends to, QK over 576 dims (512
latent + 64 rope) and PV over 512, 2 FLOPs per multiply-add, so
``2 · heads · Σ(q·ctx) · (576 + 512)``; for the uniform pattern
``Σ(q·ctx) = batch · q · ctx``. Causal masking inside the q verify tokens
(q ≪ ctx) and softmax are left out. With DCP, the measured rank's share.
Bytes: :meth:`traceattr.core.shapes.Shape.bytes_moved` (KV read once, by
dtype, plus Q and O).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from traceattr.core.shapes import HEAD_DIM, LATENT_DIM, Shape, ShapeError, parse_shape

# Vendor datasheet peaks, bytes/s; matched against the GPU name, first hit wins.
PEAK_BANDWIDTH = (
    ("B300", 8.0e12),
    ("GB300", 8.0e12),
    ("B200", 8.0e12),
    ("GB200", 8.0e12),
    ("H200", 4.8e12),
    ("H100 PCIe", 2.0e12),
    ("H100", 3.35e12),
    ("A100-SXM4-80GB", 2.039e12),
    ("A100 80GB", 1.935e12),
    ("A100", 1.555e12),
)

# Dense tensor-core peaks (without 2:4 sparsity, which decode attention cannot use), FLOP/s per dtype of the
# shape's KV cache; matched against the GPU name, first hit wins. Each row names where its numbers come from.
PEAK_DENSE_FLOPS: tuple[tuple[str, dict[str, float], str], ...] = (
    ("GB200", {"bf16": 2.5e15, "fp8": 5.0e15}, "NVIDIA GB200 NVL72 datasheet, per GPU, dense"),
    ("B200", {"bf16": 2.25e15, "fp8": 4.5e15}, "NVIDIA HGX B200 datasheet, per GPU, dense"),
    ("H200 NVL", {"bf16": 835e12, "fp8": 1671e12}, "NVIDIA H200 NVL datasheet, dense: half the sparse figure"),
    ("H200", {"bf16": 989e12, "fp8": 1979e12}, "NVIDIA H200 SXM datasheet, dense: half the sparse figure"),
    ("H100 PCIe", {"bf16": 756e12, "fp8": 1513e12}, "NVIDIA H100 PCIe datasheet, dense: half the sparse figure"),
    ("H100 NVL", {"bf16": 835e12, "fp8": 1671e12}, "NVIDIA H100 NVL datasheet, dense: half the sparse figure"),
    ("H100", {"bf16": 989e12, "fp8": 1979e12}, "NVIDIA H100 SXM datasheet, dense: half the sparse figure"),
    ("A100", {"bf16": 312e12}, "NVIDIA A100 datasheet, dense (no fp8 tensor cores)"),
)
BOUNDS = ("memory", "compute")


@dataclass(frozen=True)
class ComputePeak:
    """Dense FLOP/s per dtype of one GPU, and where the numbers come from."""

    per_dtype: dict[str, float]
    source: str

    def describe(self) -> str:
        """``bf16 989 TFLOP/s, fp8 1979 TFLOP/s (NVIDIA H200 SXM datasheet, …)``."""
        values = ", ".join(f"{k} {v / 1e12:,.0f} TFLOP/s" for k, v in self.per_dtype.items())
        return f"{values} ({self.source})"


def peak_bandwidth(devices: pl.DataFrame, override: float | None = None) -> tuple[float | None, str]:
    """(bytes/s, where the number came from) for the first device of *devices*."""
    if override:
        return override, "given"
    if devices.height:
        first = devices.head(1)
        measured = first["memory_bandwidth"][0] if "memory_bandwidth" in first.columns else None
        if measured:
            return float(measured), "nsys TARGET_INFO_GPU"
        name = str(first["name"][0]) if "name" in first.columns and first["name"][0] is not None else ""
        for key, value in PEAK_BANDWIDTH:
            if key in name:
                return value, f"datasheet ({key})"
    return None, "unknown device"


def compute_peak(gpu_name: str | None) -> ComputePeak | None:
    """The dense peaks of the GPU called *gpu_name* (as nsys names it: ``NVIDIA H200``), or None when unknown."""
    for key, per_dtype, source in PEAK_DENSE_FLOPS:
        if gpu_name and key in gpu_name:
            return ComputePeak(dict(per_dtype), source)
    return None


def device_compute_peak(devices: pl.DataFrame) -> ComputePeak | None:
    """:func:`compute_peak` of the first device of *devices* (a trace's TARGET_INFO_GPU rows)."""
    if devices.height == 0 or "name" not in devices.columns:
        return None
    return compute_peak(devices["name"][0])


def call_flops(shape: Shape) -> int:
    """FLOPs one decode call of *shape* must do (see the module doc); with DCP, the measured rank's share."""
    share = shape.rank_share() if shape.dcp > 1 else shape
    # per request: its query tokens × the cached tokens they attend to ("row": b·q requests of one token each)
    token_pairs = sum(q * ctx for q, ctx in zip(share.q_lens(), share.kv_lens(), strict=True))
    return 2 * share.heads * token_pairs * (HEAD_DIM + LATENT_DIM)


def shape_work(shapes: list[str]) -> pl.DataFrame:
    """``shape, bytes, flops, dtype`` for each shape name that parses (null columns for the others)."""
    rows: list[tuple[str, int | None, int | None, str | None]] = []
    for name in shapes:
        try:
            s = parse_shape(name)
        except ShapeError:
            rows.append((name, None, None, None))
            continue
        rows.append((name, s.bytes_moved(), call_flops(s), s.kv_dtype))
    return pl.DataFrame(
        rows, schema={"shape": pl.String, "bytes": pl.Int64, "flops": pl.Int64, "dtype": pl.String}, orient="row"
    )


def bound_columns(
    peak_bytes_per_s: float | None, peak: ComputePeak | None, median_us: str = "median_us"
) -> list[pl.Expr]:
    """``bound`` (memory | compute) and ``roofline`` (the share of that bound reached by the median call), from
    a frame with ``bytes``, ``flops``, ``dtype`` and *median_us*. Both need both peaks: a bound judged on
    bytes alone calls a compute-bound shape inefficient."""
    flops_peak = (
        pl.col("dtype").replace_strict(peak.per_dtype, default=None, return_dtype=pl.Float64)
        if peak is not None and peak_bytes_per_s
        else pl.lit(None, pl.Float64)
    )
    memory_s = pl.col("bytes") / peak_bytes_per_s if peak_bytes_per_s else pl.lit(None, pl.Float64)
    compute_s = pl.col("flops") / flops_peak
    bound_s = pl.max_horizontal(memory_s, compute_s)
    known = memory_s.is_not_null() & compute_s.is_not_null()
    return [
        pl.when(known).then(pl.when(compute_s > memory_s).then(pl.lit("compute")).otherwise(pl.lit("memory")))
        .otherwise(None).alias("bound"),
        pl.when(known).then(bound_s / (pl.col(median_us) * 1e-6)).otherwise(None).cast(pl.Float64).alias("roofline"),
    ]  # fmt: skip
