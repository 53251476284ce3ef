"""How long the non-GPU part of a CAKE-sized round takes: 27 rows × 2 arms × 3 rounds, receipts and report.

    python benchmarks/bench_round.py [--iters 100] [--rows 27] [--rounds 3] [--profile]

The captures are made up front (schema-exact synthetic exports, tests.synth: per row ``--iters`` ABBA
iterations of an fa3-style call (one kernel) and a split-KV call (split + merge kernel), each after an
L2-flush kernel in its own ``traceattr:flush`` range, a ``traceattr:hold`` range per group; a runner.json
with clocks, checks and CUDA-event times). The timed part is everything ``traceattr round`` does
besides the GPU and nsys: per capture ``jobs.profile.execute`` after the capture (attribute, analyse,
the run folder's tables and run.json), then the receipt (round_rows, causes, stopping rule), its three
files and report.html. nsys itself is replaced by a copy of the prepared export; the GPU time of a real
round (capture and export) is not in these numbers.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.synth

from tests.synth.builder import TraceBuilder
from traceattr.analysis.rounds import Row
from traceattr.core.callnames import DOMAIN, FLUSH, HOLD, CallName
from traceattr.core.shapes import parse_shape
from traceattr.jobs import profile
from traceattr.jobs.capture import CaptureResult
from traceattr.jobs.round import RoundPlan, run_round
from traceattr.runner.plan import arm_letters, iteration_order

BASE, CAND = "fa3", "fa3[splits=4]"
SPLIT = "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<576, 64, 64, 4>, true>(Params)"
MERGE = "void flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<576, 64, 64, 4>, 4>(Params)"
ONE = "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<576, 64, 64, 4>, false>(Params)"
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<unsigned char>>(int, T, U)"


def rows(n: int) -> tuple[Row, ...]:
    labels = [f"q{q}_ctx{c}" for q in (1, 2, 4, 8) for c in ("4k", "8k", "16k", "32k", "64k", "131k", "262k")]
    return tuple(Row(label, parse_shape(label).name) for label in labels[:n])


def make_capture(path: Path, arms: tuple[str, str], shapes: tuple[str, ...], iters: int) -> dict:
    """A synthetic export at *path*; returns its runner.json."""
    b = TraceBuilder()
    dom = b.domain(DOMAIN, tid=1)
    letters = arm_letters(arms)
    now, events = 10_000, []
    for k, shape in enumerate(shapes):
        base_ns = 20_000 + 3_000 * k
        for i in range(iters):
            b.push_range(tid=1, start=now, end=now + 500, message=HOLD, domain=dom)
            now += 1_000
            for arm in iteration_order(arms, i):
                b.push_range(tid=1, start=now, end=now + 400, message=FLUSH, domain=dom)
                b.launch(tid=1, start=now + 50, end=now + 60, kernel=FILL, gpu_start=now + 100, gpu_end=now + 40_000)
                now += 40_100
                b.push_range(tid=1, start=now, end=now + 600, message=CallName(arm, shape, letters[arm], i).message,
                             domain=dom)  # fmt: skip
                dur = int(base_ns * (0.8 if arm == CAND else 1.0) * (1 + 0.003 * ((i * 7919) % 13 - 6) / 6))
                if arm == CAND:
                    b.launch(tid=1, start=now + 20, end=now + 30, kernel=SPLIT, gpu_start=now + 100,
                             gpu_end=now + 100 + dur - 3_000)  # fmt: skip
                    b.launch(tid=1, start=now + 40, end=now + 50, kernel=MERGE, gpu_start=now + 100 + dur - 2_900,
                             gpu_end=now + 100 + dur)  # fmt: skip
                else:
                    b.launch(tid=1, start=now + 20, end=now + 30, kernel=ONE, gpu_start=now + 100,
                             gpu_end=now + 100 + dur)  # fmt: skip
                events.append({"backend": arm, "shape": shape, "iter": i, "event_us": dur / 1e3 + 1.5})
                now += dur + 5_000
    b.write(path, gpu_name="NVIDIA H200", cc=(9, 0))
    check = {"status": "ok", "relative_error": 0.004, "output_sha256": "ab" * 32}
    return {
        "gpu": {"name": "NVIDIA H200", "max_sm_clock_mhz": 1980}, "timed": True, "events": events,
        "protocol": {"between": "flush", "order": "abba", "flush_bytes": 128 << 20, "flush_kind": "fill+evict",
                     "graphs": False, "hold_us": 100.0, "hold": "host", "hold_timeout_s": 1.0},
        "arms": {BASE: {"backend": "fa3", "options": {}, "program": "fa3"},
                 CAND: {"backend": "fa3", "options": {"splits": 4}, "program": "fa3"}},
        "shapes": {s: {"backends": {BASE: check, CAND: check},
                       "clocks": {"sm_clock_mhz_median": 1900, "sm_clock_max_mhz": 1980, "fraction": 0.96},
                       "hold": {"groups": iters, "timeouts": 0, "gpu_wait_us": {"median": 450.0, "max": 700.0}}}
                   for s in shapes},
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=27)
    ap.add_argument("--iters", type=int, default=100, help="ABBA iterations per row and capture")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="cProfile the timed part (top 25 by cumulative time)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_round_"))
    the_rows = rows(args.rows)
    shapes = tuple(r.shape for r in the_rows)
    made = time.perf_counter()
    prepared = {}
    for r in range(args.rounds):
        arms = (BASE, CAND) if r % 2 == 0 else (CAND, BASE)
        path = work / f"prepared-{r}.sqlite"
        prepared[arms] = prepared.get(arms) or (path, make_capture(path, arms, shapes, args.iters))
    print(f"prepared {len(prepared)} synthetic exports in {time.perf_counter() - made:.1f} s (not timed)")

    def fake_capture(nsys, output, app, *, capture_range=True, on_line=None, env=None, timeout=None):
        folder = Path(output).parent
        plan = json.loads((folder / "plan.json").read_text())
        source, runner = prepared[tuple(plan["arms"])]
        shutil.copy(source, folder / "trace.sqlite")
        (folder / "trace.nsys-rep").write_bytes(b"")
        (folder / "runner.json").write_text(json.dumps(runner))
        return CaptureResult(("nsys", "profile"), 0, folder / "trace.nsys-rep", folder / "trace.sqlite", ())

    profile.capture = fake_capture  # type: ignore[assignment]
    profile.require_runnable = lambda plan: None  # type: ignore[assignment]
    plan = RoundPlan(rows=the_rows, baseline=BASE, candidate=CAND, folder=work / "round", rounds=args.rounds,
                     iters=args.iters, max_noise=None)  # fmt: skip
    profiler = cProfile.Profile() if args.profile else None
    started = time.perf_counter()
    if profiler:
        profiler.enable()
    receipt = run_round(plan, report=True)
    if profiler:
        profiler.disable()
    wall = time.perf_counter() - started
    s = receipt.summary()
    calls = args.rows * 2 * args.iters * args.rounds
    print(f"{args.rows} rows × 2 arms × {args.rounds} rounds × {args.iters} ABBA iterations ({calls:,} timed calls): "
          f"{wall:.1f} s without the GPU; {s['passing']} / {s['rows']} rows pass")  # fmt: skip
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
