"""A ≥ 1 M-kernel, ≥ 200 k-range CUDA workload to capture with nsys (issue 36): tiny torch ops in NVTX ranges.

    nsys profile --trace cuda,nvtx --sample=none --cpuctxsw=none -o big python benchmarks/big_report_workload.py

Each step is a range ``backend=B|shape=S|iter=I`` (a name traceattr reads as backend + shape) holding
three child ranges of five in-place elementwise kernels each: 70,000 steps give 1.05 M kernels and
280,000 NVTX ranges, issue 36's shape. Two "backends" (``add_`` and ``mul_``), in ABBA order, on 8
shapes (tensor sizes), so ``compare`` and ``report`` have verdicts to give. Tiny kernels keep the
capture short: the CPU's launches, not the GPU, set its length.
"""

from __future__ import annotations

import argparse
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=70_000)
    ap.add_argument("--shapes", type=int, default=8)
    args = ap.parse_args()
    nvtx = torch.cuda.nvtx
    tensors = [torch.zeros(1024 << s, device="cuda") for s in range(args.shapes)]
    ops = {"add": lambda t: t.add_(1.0), "mul": lambda t: t.mul_(1.0000001)}
    for t in tensors:  # the kernels loaded before the steps
        ops["add"](t), ops["mul"](t)
    torch.cuda.synchronize()
    start = time.perf_counter()
    per_shape = max(1, args.steps // args.shapes)
    for i in range(args.steps):
        backend = "add" if i % 4 in (0, 3) else "mul"  # ABBA
        s = min(i // per_shape, args.shapes - 1)
        op, t = ops[backend], tensors[s]
        nvtx.range_push(f"backend={backend}|shape=n{1024 << s}|iter={i}")
        for part in ("load", "compute", "store"):
            nvtx.range_push(part)
            op(t), op(t), op(t), op(t), op(t)
            nvtx.range_pop()
        nvtx.range_pop()
    torch.cuda.synchronize()
    wall = time.perf_counter() - start
    print(f"{args.steps:,} steps, {15 * args.steps:,} kernels, {4 * args.steps:,} ranges in {wall:.1f} s")


if __name__ == "__main__":
    main()
