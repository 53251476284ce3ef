"""What makes a call's time depend on the call before it (issue 17, item 4): a GPU probe, no nsys.

For each row, mode (eager / CUDA graphs), target arm T, predecessor P and
"between" kind, it enqueues behind one host-released hold ``groups`` × ``n``
repetitions of ``P, between, [event] T [event]`` and prints T's median
CUDA-event µs. P = ``self`` is T itself (what the first call of an ABBA group
follows: the last call of the previous group, same arm), ``other`` the other
arm, ``idle`` nothing (a fresh hold). Between kinds:

  zero128   torch.zero_ of a 128 MiB buffer: the runner's flush
  zero1g    the same over 1 GiB
  read128   a sum over 128 MiB (reads: no dirty lines left in L2)
  tlb       zero128, then one byte read every 64 KiB over 16 GiB (evicts GPU TLB entries, ~no L2 traffic)
  spin20    zero128, then a 20 µs GPU spin (what a fixed hold leaves: time for clocks/PDL to settle)

    python examples/rounds/predecessor_probe.py q1_ctx32k q8_ctx131k --arms fa3 flashmla --out probe.csv
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys

import torch

from traceattr.backends import current_device
from traceattr.backends.arms import check_arm, parse_arm
from traceattr.core.shapes import parse_shape
from traceattr.runner.hold import HostHold
from traceattr.runner.loop import Prepared, ShapeInputs, prepare_arm
from traceattr.runner.plan import RunPlan

MiB = 1 << 20


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("rows", nargs="+")
    ap.add_argument("--arms", nargs=2, default=["fa3", "flashmla"])
    ap.add_argument("--kinds", nargs="+", default=["zero128", "zero1g", "read128", "tlb", "spin20"])
    ap.add_argument("--modes", nargs="+", default=["eager", "graphs"])
    ap.add_argument("--n", type=int, default=8)  # repetitions per group
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--out", default="probe.csv")
    args = ap.parse_args()
    device, _ = current_device()
    big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    tlb_area = torch.empty(16 << 30, dtype=torch.uint8, device="cuda")
    tlb_index = torch.arange(0, tlb_area.numel(), 64 << 10, device="cuda")
    sink = torch.empty((), device="cuda")

    def between(kind: str) -> None:
        if kind == "zero128":
            big[: 128 * MiB].zero_()
        elif kind == "zero1g":
            big.zero_()
        elif kind == "read128":
            sink.copy_(big[: 128 * MiB].view(torch.float32).sum())
        elif kind == "tlb":
            big[: 128 * MiB].zero_()
            sink.copy_(tlb_area[tlb_index].sum())
        elif kind == "spin20":
            big[: 128 * MiB].zero_()
            torch.cuda._sleep(40_000)  # ~20 µs at 1.98 GHz
        else:
            raise SystemExit(f"unknown kind {kind}")

    hold = HostHold(timeout_s=5.0)
    rows_out = []
    for row in args.rows:
        shape = parse_shape(row)
        plan = RunPlan(shapes=(shape.name,), arms=tuple(args.arms))
        data = ShapeInputs(shape, plan)
        for mode in args.modes:
            ready = {}
            for text in args.arms:
                arm = parse_arm(text)
                check_arm(arm, shape, device)
                call, _ = prepare_arm(arm, shape, data, 0)
                ready[arm.label] = Prepared(call, mode == "graphs")
                for _ in range(3):
                    ready[arm.label].launch()
            torch.cuda.synchronize()
            labels = list(ready)
            for kind in args.kinds:
                for target in labels:
                    other = labels[1] if target == labels[0] else labels[0]
                    for pred_name, pred in (("self", target), ("other", other), ("idle", None)):
                        times = []
                        for _ in range(args.groups):
                            hold.hold()
                            pairs = []
                            for _ in range(args.n):
                                if pred is not None:
                                    ready[pred].launch()
                                between(kind)
                                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                                a.record()
                                ready[target].launch()
                                b.record()
                                pairs.append((a, b))
                            hold.release()
                            torch.cuda.synchronize()
                            # idle: only the first call of a group follows the hold alone
                            use = pairs[:1] if pred is None else pairs
                            times += [a.elapsed_time(b) * 1e3 for a, b in use]
                        med = statistics.median(times)
                        rows_out.append(dict(row=row, mode=mode, kind=kind, target=target, pred=pred_name,
                                             median_us=round(med, 2), n=len(times)))  # fmt: skip
                        print(
                            f"{row:11s} {mode:6s} {kind:8s} {target:9s} after {pred_name:5s} {med:8.2f} µs", flush=True
                        )
            del ready
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows_out[0]))
        w.writeheader()
        w.writerows(rows_out)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
