"""On a GPU: split-mla's configurations side by side, plain and stamped, each call behind the flush.

    python examples/split_mla/bench.py OUT.json ROW[:opt=v,...] ...
    python examples/split_mla/bench.py --warm ROW[:opt=v,...]   # compile only (run several at once first)
    python examples/split_mla/bench.py --pick OUT.json           # the options device.sh's rounds use

Per row and option set, both merges: the relative error against the torch reference,
stamped vs plain parity (bitwise), then REPS rounds that time every arm of the row once
each (order rotating), all behind a GPU hold the host releases once the round is
enqueued (traceattr.runner.hold), so no call waits for its own Python launch: CUDA
events around each call read the GPU's time for it (its kernels and the gap between
them), not the host's. Also the floor probes (empty kernel, one tile). This picks a
configuration; the numbers that count are the rounds' (nsys spans, gates).
``old`` as the option set runs the package ``split_mla_old`` (an earlier kernel, if
importable) on the same machine.
"""

from __future__ import annotations

import importlib
import json
import statistics
import sys

import torch

from traceattr.backends.base import SM_SCALE
from traceattr.backends.inputs import build_inputs
from traceattr.backends.reference import mla_reference, relative_error
from traceattr.core.shapes import parse_shape
from traceattr.runner.flush import Flush
from traceattr.runner.hold import HostHold

REPS = 20


def arms_of(spec: str, shape, inputs) -> dict[str, object]:
    opts = spec.partition(":")[2]
    old = opts == "old"
    module = importlib.import_module("split_mla_old.backend" if old else "split_mla.backend")
    kw = {} if old or not opts else {k: int(v) for k, v in (x.split("=") for x in opts.split(","))}
    arms = {}
    for merge in ("reduce", "inkernel"):
        for plain in (True, False):
            arms[f"{merge}{',plain' if plain else ''}"] = module.SplitMLA(merge=merge, plain=plain, **kw).prepare(
                shape, inputs
            )
    return arms


def timed_rounds(calls: dict[str, object], flush: Flush, hold: HostHold, reps: int) -> dict[str, list[float]]:
    names = list(calls)
    times: dict[str, list[float]] = {n: [] for n in names}
    for i in range(reps):
        order = names[i % len(names) :] + names[: i % len(names)]
        events = []
        hold.hold()
        for n in order:
            flush.run()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            calls[n]()
            b.record()
            events.append((n, a, b))
        hold.release()
        torch.cuda.synchronize()
        for n, a, b in events:
            times[n].append(a.elapsed_time(b) * 1000.0)
    return times


def pick(report: dict[str, dict]) -> str:
    """The arm options the measurements favour (plain build, reduce merge), as ``,k=v`` text.

    Peel: the ``peel=N`` whose plain calls, summed over the rows measured with every peel,
    beat the default's by more than 2%. Splits at short context: the fastest of q1_ctx8k's
    split counts, as ``min_chunk``.
    """

    def plain(spec: str) -> float:
        return float(report[spec]["median_us"]["reduce,plain"])

    def good(spec: str) -> bool:
        return all(e <= 0.02 for e in report[spec]["errors"].values()) and all(report[spec]["parity"].values())

    opts = ""
    peels = sorted({s.partition(":peel=")[2] for s in report if ":peel=" in s})
    rows = [r for r in report if ":" not in r and all(f"{r}:peel={p}" in report for p in peels)]
    if peels and rows:
        sums = {p: sum(plain(f"{r}:peel={p}") for r in rows) for p in peels
                if all(good(f"{r}:peel={p}") for r in rows)}  # fmt: skip
        best = min(sums, key=sums.__getitem__, default=None)
        if best is not None and sums[best] < 0.98 * sum(map(plain, rows)):
            opts += f",peel={best}"
    short = {int(report[s]["splits"]): plain(s) for s in report if s == "q1_ctx8k" or s.startswith("q1_ctx8k:splits=")}
    if "q1_ctx8k" in report and short:
        best_splits = min(short, key=short.__getitem__)
        if best_splits != int(report["q1_ctx8k"]["splits"]):
            opts += f",min_chunk={8192 // best_splits}"
    return opts


def main() -> int:
    if sys.argv[1] == "--pick":
        with open(sys.argv[2], encoding="utf-8") as f:
            print(pick(json.load(f)))
        return 0
    out_path, specs = sys.argv[1], sys.argv[2:]
    warm = out_path == "--warm"
    flush, hold = (None, None) if warm else (Flush(2 * 60 * 2**20), HostHold())
    report, ok = {}, True
    inputs_of: dict[str, tuple] = {}
    for spec in specs:
        row = spec.partition(":")[0]
        if row not in inputs_of:
            shape = parse_shape(row)
            inputs = build_inputs(shape)
            inputs_of = {row: (shape, inputs, mla_reference(inputs, inputs.layout.requests(), SM_SCALE))}
        shape, inputs, ref = inputs_of[row]
        try:
            arms = arms_of(spec, shape, inputs)
        except ImportError as err:
            print(f"{spec}: skipped ({err})", flush=True)
            continue
        outs = {n: a.output_rows(a.run()).clone() for n, a in arms.items()}
        errs = {n: relative_error(o, ref) for n, o in outs.items()}
        parity = {m: bool(torch.equal(outs[m], outs[f"{m},plain"])) for m in ("reduce", "inkernel")}
        calls = {n: a.run for n, a in arms.items()}
        calls |= {f"{m}:{p}": getattr(arms[f"{m},plain"], f"run_{p}") for m in ("reduce", "inkernel")
                  for p in ("empty", "one_tile")}  # fmt: skip
        for c in calls.values():
            c()
        torch.cuda.synchronize()
        if flush is None or hold is None:
            continue  # --warm: compiled, not timed
        times = timed_rounds(calls, flush, hold, REPS)
        med = {n: statistics.median(v) for n, v in times.items()}
        any_arm = next(iter(arms.values()))
        entry = {"splits": any_arm.splits, "chunk": any_arm.chunk, "errors": errs, "parity": parity, "median_us": med,
                 "times_us": times}  # fmt: skip
        report[spec] = entry
        good = all(e <= 0.02 for e in errs.values()) and all(parity.values())
        ok = ok and good
        for m in ("reduce", "inkernel"):
            ratios = [s / p for s, p in zip(times[m], times[f"{m},plain"], strict=True)]
            print(f"{spec:34s} {m:8s} splits {any_arm.splits:3d}  plain {med[f'{m},plain']:7.2f}  "
                  f"stamped {med[m]:7.2f}  paired {statistics.median(ratios) - 1:+.2%}  one_tile "
                  f"{med[f'{m}:one_tile']:6.2f}  empty {med[f'{m}:empty']:5.2f}  x{med[f'{m},plain'] / med[f'{m}:one_tile']:.2f}"
                  f"  err {errs[m]:.2g} parity {parity[m]} {'OK' if good else 'WRONG'}", flush=True)  # fmt: skip
    if not warm:
        with open(out_path, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
