"""On a GPU: split-mla against the torch reference, and the stamp overhead (stamped vs plain, CUDA events).

    python examples/split_mla/check.py OUT.json [SHAPE ...]

Per shape and merge mode: the relative error of the output against traceattr's torch
reference (both modes must pass 0.02, the runner's bf16 tolerance), every stamp row
written, then REPS interleaved calls of the stamped and the plain kernel, each behind
the runner's L2 flush, timed with CUDA events: medians, the overhead ratio, and the median of the
paired ratios (call i stamped / call i plain) with its 95% interval.
Exit 1 when a mode is wrong.
"""

from __future__ import annotations

import json
import statistics
import sys

import torch
from split_mla.backend import SplitMLA

from traceattr.backends.base import SM_SCALE
from traceattr.backends.inputs import build_inputs
from traceattr.backends.reference import mla_reference, relative_error
from traceattr.core.precision import median_interval
from traceattr.core.shapes import parse_shape
from traceattr.runner.flush import Flush

REPS = 100
TOLERANCE = 0.02


def timed(call, flush: Flush) -> float:
    flush.run()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    call.run()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) * 1000.0


def main() -> int:
    out_path, names = sys.argv[1], sys.argv[2:] or ["q1_ctx8k", "q8_ctx131k"]
    flush = Flush(2 * 60 * 2**20)
    report, ok = {}, True
    for name in names:
        shape = parse_shape(name)
        inputs = build_inputs(shape)
        ref = mla_reference(inputs, inputs.layout.requests(), SM_SCALE)
        for merge in ("reduce", "inkernel"):
            stamped = SplitMLA(merge=merge).prepare(shape, inputs)
            plain = SplitMLA(merge=merge, plain=True).prepare(shape, inputs)
            err = relative_error(stamped.output_rows(stamped.run()), ref)
            err_plain = relative_error(plain.output_rows(plain.run()), ref)
            torch.cuda.synchronize()
            zero_rows = int((stamped.stamp_buffer[:, 0] == 0).sum().item())
            times = {"stamped": [], "plain": []}
            for i in range(REPS):
                for which, call in (("stamped", stamped), ("plain", plain))[:: 1 if i % 2 == 0 else -1]:
                    times[which].append(timed(call, flush))
            med = {k: statistics.median(v) for k, v in times.items()}
            ratios = [a / b for a, b in zip(times["stamped"], times["plain"], strict=True)]
            low, high = median_interval(ratios)
            entry = {"relative_error": err, "relative_error_plain": err_plain, "unwritten_stamp_rows": zero_rows,
                     "splits": stamped.splits, "chunk": stamped.chunk, "median_us": med, "reps": REPS,
                     "overhead": med["stamped"] / med["plain"] - 1.0,
                     "paired_overhead": statistics.median(ratios) - 1.0, "paired_interval": [low - 1.0, high - 1.0],
                     "times_us": times}  # fmt: skip
            report[f"{name} merge={merge}"] = entry
            good = err <= TOLERANCE and err_plain <= TOLERANCE
            ok = ok and good
            print(f"{name} merge={merge}: err {err:.3g}/{err_plain:.3g} {'OK' if good else 'WRONG'}; "
                  f"splits {stamped.splits}; unwritten rows {zero_rows}; stamped {med['stamped']:.2f} µs, "
                  f"plain {med['plain']:.2f} µs, overhead {entry['overhead']:+.2%} (paired {entry['paired_overhead']:+.2%} "
                  f"[{low - 1:+.2%}, {high - 1:+.2%}])", flush=True)  # fmt: skip
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
