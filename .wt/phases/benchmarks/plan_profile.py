"""Where a fa3 arm's re-plan goes on the host: cProfile over 200 ``update`` calls of a captured arm.

python benchmarks/plan_profile.py   (on a GPU with flashinfer)
"""

from __future__ import annotations

import cProfile
import pstats
import time

import torch

from traceattr.runtime.graphs import StaticInputs, build_arm
from traceattr.runtime.metadata import SlotLayout, fa_launches


def main() -> None:
    for q, label in ((8, "fa3"), (1, "fa3[splits=4]")):
        inputs = StaticInputs.random(SlotLayout.for_max_ctx(1, q, 64, 900_000), 16)
        arm = build_arm(label, inputs, [8192])
        lens = [[c] for c in (100_000, 500_000) * 100]
        for seq in lens[:10]:
            arm.update(seq)
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        for seq in lens:
            fa_launches(inputs.layout, seq, 1 if label == "fa3" else 4)
        meta_us = (time.perf_counter_ns() - t0) / len(lens) / 1e3
        prof = cProfile.Profile()
        t0 = time.perf_counter_ns()
        prof.enable()
        for seq in lens:
            arm.update(seq)
        prof.disable()
        total_us = (time.perf_counter_ns() - t0) / len(lens) / 1e3
        print(f"== q{q} {label}: update {total_us:.0f} µs per step (profiled), metadata in Python {meta_us:.1f} µs")
        stats = pstats.Stats(prof)
        stats.sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
