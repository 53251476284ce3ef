"""The CUDA-event times of a decode receipt against the GPU spans nsys saw in its NVTX ranges.

    traceattr attribute q8_nsys.sqlite --match '^decode step' -f csv -o att/
    python benchmarks/decode_nsys_check.py examples/decode/q8_nsys.json att/ranges.csv

Each timed call is an NVTX range ``decode step=<i> arm=<label> round=<r>``; its GPU span (first kernel
start to last kernel end, traceattr's attribution) is set beside the receipt's event time of that call.
"""

from __future__ import annotations

import csv
import json
import re
import statistics
import sys
from pathlib import Path

_NAME = re.compile(r"^decode step=(\d+) arm=(\S+) round=(\d+)$")


def main(receipt: str, ranges: str) -> None:
    times = json.loads(Path(receipt).read_text(encoding="utf-8"))["times_us"]
    per: dict[str, list[tuple[float, float, int]]] = {}
    with Path(ranges).open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        m = _NAME.match(row["name"])
        if m is None:
            continue  # the unattributed row, other ranges
        event = times[m[2]][int(m[1])][int(m[3])]
        per.setdefault(m[2], []).append((event, int(row["gpu_span_ns"]) / 1e3, int(row["kernels"])))
    calls = [c for v in per.values() for c in v]
    gaps = [e - s for e, s, _ in calls]
    print(f"{len(calls)} timed calls; event − nsys span: median {statistics.median(gaps):.2f} µs, "
          f"min {min(gaps):.2f}, max {max(gaps):.2f}")  # fmt: skip
    for arm, v in per.items():
        ev, sp = sum(e for e, _, _ in v), sum(s for _, s, _ in v)
        kernels = sorted({k for _, _, k in v})
        print(
            f"{arm}: {len(v)} calls, events {ev:,.1f} µs, nsys spans {sp:,.1f} µs ({sp / ev:.3f}), kernels per call {kernels}"
        )


if __name__ == "__main__":
    main(*sys.argv[1:3])
