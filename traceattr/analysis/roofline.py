"""Peak HBM bandwidth: what a memory-bound decode call is measured against."""

from __future__ import annotations

import polars as pl

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


def peak_bandwidth(devices: pl.DataFrame, override: float | None = None) -> tuple[float | None, str]:
    """(bytes/s, where the number came from) for the first device of *devices*."""
    if override:
        return override, "given"
    if devices.height:
        row = devices.row(0, named=True)
        if row.get("memory_bandwidth"):
            return float(row["memory_bandwidth"]), "nsys TARGET_INFO_GPU"
        name = row.get("name") or ""
        for key, value in PEAK_BANDWIDTH:
            if key in name:
                return value, f"datasheet ({key})"
    return None, "unknown device"
