"""Generate a schema-exact nsys export shaped like an MLA decode sweep.

    python benchmarks/make_sweep_trace.py OUT.sqlite [--calls 500000]
    python benchmarks/make_sweep_trace.py OUT.sqlite --shape nested [--calls 200000]

Per shape a ``sweep`` range (level 0) holds its calls; each call is a
``traceattr`` range (level 1) around one backend call: a FlashMLA-style split
kernel + combine kernel, or an fa3-style single kernel, alternating (arms
A B B A). Before each call an L2 flush kernel runs in its own ``flush`` range
outside the call. With the default 500k calls: 750k calls' kernels
(1,250,000 kernels), 1.25M API rows and ~1M NVTX ranges on one thread, as a
sweep run by ``traceattr profile`` produces them.

``--shape nested`` is the shape of issue 10: each call is a range holding a
nested range around its kernel (arms A B B A: a FlashMLA split kernel or an
fa3 kernel), and an L2 flush kernel outside every range before every other
call, so 1–2 kernels per call. With 200k calls: 300,000 kernels, 300,000 API
rows, 400,000 NVTX ranges.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

# the trace writer is the tests' (tests/synth): the repository root on the path, from any folder
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.synth.builder import global_pid, global_tid
from tests.synth.writer import write_export
from traceattr.trace import schema as S

PID, TID = 3131, 3131
SPLIT = "void flash::flash_fwd_splitkv_mla_kernel<Flash_fwd_kernel_traits_mla<576, 64, 64, 8, cutlass::bfloat16_t, 512>, true, false, true>(Flash_fwd_mla_params)"
COMBINE = "void flash::flash_fwd_mla_combine_kernel<cutlass::bfloat16_t, float, 512, 32>(Flash_fwd_mla_params)"
FA3 = "void flashinfer::mla::hopper::BatchMLAPageAttentionHopperKernel<flashinfer::mla::hopper::HopperKernelTraits<true, 2u, 512u, 64u, 64u, 64u, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int>, flashinfer::MLAParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int>>(T2)"
FLUSH = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<signed char>, std::array<char *, 1ul>>(int, T2, T3)"


def build(calls: int, shapes: int = 50, seed: int = 0) -> dict[str, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    strings = ["cudaLaunchKernel_v7000", SPLIT, COMBINE, FA3, FLUSH, "flash::flash_fwd_splitkv_mla_kernel",
               "flash::flash_fwd_mla_combine_kernel", "flashinfer::mla::hopper::BatchMLAPageAttentionHopperKernel",
               "at::native::vectorized_elementwise_kernel", "_ZN5flash27flash_fwd_splitkv_mla_kernelE",
               "_ZN5flash28flash_fwd_mla_combine_kernelE", "_ZN10flashinfer3mla6hopper33BatchMLAPageAttentionHopperKernelE",
               "_ZN2at6native29vectorized_elementwise_kernelE", "flush", "sweep"]  # fmt: skip
    sid = {s: i + 1 for i, s in enumerate(strings)}
    period = 200_000  # ns per iteration on the timeline
    t0 = 1_000_000_000 + np.arange(calls, dtype=np.int64) * period
    arm = np.array([0, 1, 1, 0])[np.arange(calls) % 4]  # ABBA: 0 = FlashMLA (2 kernels), 1 = fa3 (1 kernel)
    shape = np.arange(calls) * shapes // calls
    # call messages are registered strings, one per call (as the nvtx package does)
    msg_base = len(strings) + 1
    messages = [f"backend={'flashmla' if a == 0 else 'fa3'}|shape=s{s}|arm={'AB'[a]}|iter={i}"
                for i, (a, s) in enumerate(zip(arm.tolist(), shape.tolist(), strict=False))]  # fmt: skip
    strings_df = pl.DataFrame({"id": list(sid.values()) + list(range(msg_base, msg_base + calls)),
                               "value": list(sid) + messages})  # fmt: skip

    # per call: flush launch, then 1 or 2 attention launches inside the call range
    n_launch = 1 + (2 - arm)  # flush + kernels
    total = int(n_launch.sum())
    call_of = np.repeat(np.arange(calls), n_launch)
    slot = np.arange(total) - np.repeat(np.cumsum(n_launch) - n_launch, n_launch)
    base = t0[call_of]
    api_start = base + 1_000 + slot * 15_000 + rng.integers(0, 500, total)
    api_end = api_start + 4_000 + rng.integers(0, 2_000, total)
    dur_main = 40_000 + rng.integers(0, 4_000, total)
    dur = np.where(slot == 0, 30_000, np.where(slot == 1, dur_main, 36_000 + rng.integers(0, 3_000, total)))
    gpu_start = api_end + 3_000 + slot * 45_000
    gpu_end = gpu_start + dur
    kname = np.where(
        slot == 0, sid[FLUSH], np.where(arm[call_of] == 1, sid[FA3], np.where(slot == 1, sid[SPLIT], sid[COMBINE]))
    )
    corr = np.arange(1, total + 1, dtype=np.int64)
    gtid, gpid = global_tid(PID, TID), global_pid(PID)
    runtime = pl.DataFrame({"start": api_start, "end": api_end, "eventClass": np.zeros(total, np.int64),
                            "globalTid": np.full(total, gtid), "correlationId": corr,
                            "nameId": np.full(total, sid["cudaLaunchKernel_v7000"]), "returnValue": np.zeros(total, np.int64)})  # fmt: skip
    kernel = pl.DataFrame({"start": gpu_start, "end": gpu_end, "deviceId": np.zeros(total, np.int64),
                           "contextId": np.ones(total, np.int64), "streamId": np.full(total, 7),
                           "correlationId": corr, "globalPid": np.full(total, gpid),
                           "demangledName": kname, "shortName": kname + 4,  # short names follow the 4 full ones
                           "gridX": np.full(total, 132),
                           "gridY": np.ones(total, np.int64), "gridZ": np.ones(total, np.int64),
                           "blockX": np.full(total, 256), "blockY": np.ones(total, np.int64),
                           "blockZ": np.ones(total, np.int64), "registersPerThread": np.full(total, 168),
                           # filled as a real export fills them, so the file has a real row size
                           "greenContextId": np.zeros(total, np.int64), "mangledName": kname + 8,  # then the 4 mangled ones

                           "launchType": np.zeros(total, np.int64), "cacheConfig": np.zeros(total, np.int64),
                           "staticSharedMemory": np.where(slot == 0, 0, 16), "dynamicSharedMemory": np.where(slot == 0, 0, 230_400),
                           "localMemoryPerThread": np.zeros(total, np.int64), "localMemoryTotal": np.full(total, 250_871_808),
                           "gridId": np.arange(1000, 1000 + total, dtype=np.int64),
                           "sharedMemoryExecuted": np.where(slot == 0, 32_768, 233_472),
                           "sharedMemoryLimitConfig": np.zeros(total, np.int64)})  # fmt: skip
    # NVTX: domain, one sweep range per shape, a flush range and a call range per call
    first_api = api_start[np.cumsum(n_launch) - n_launch]
    last_api_end = api_end[np.cumsum(n_launch) - 1]
    flush_start, flush_end = first_api - 200, api_end[np.cumsum(n_launch) - n_launch] + 100
    call_start, call_end = flush_end + 200, last_api_end + 300
    sweep_start = np.array([flush_start[shape == s].min() - 1_000 for s in range(shapes)])
    sweep_end = np.array([call_end[shape == s].max() + 1_000 for s in range(shapes)])
    nv = pl.concat([
        pl.DataFrame({"start": [0], "end": [None], "eventType": [S.NVTX_DOMAIN_CREATE], "text": ["traceattr"], "textId": [None]},
                     schema_overrides={"end": pl.Int64, "textId": pl.Int64}),
        pl.DataFrame({"start": sweep_start, "end": sweep_end, "eventType": S.NVTX_PUSHPOP, "text": None, "textId": sid["sweep"]}),
        pl.DataFrame({"start": flush_start, "end": flush_end, "eventType": S.NVTX_PUSHPOP, "text": None, "textId": sid["flush"]}),
        pl.DataFrame({"start": call_start, "end": call_end, "eventType": S.NVTX_PUSHPOP, "text": None,
                      "textId": np.arange(msg_base, msg_base + calls)}),
    ], how="vertical_relaxed").sort("start").with_columns(globalTid=pl.lit(gtid), domainId=pl.lit(1), color=pl.lit(255))  # fmt: skip
    return {"StringIds": strings_df, S.KERNEL: kernel, S.RUNTIME: runtime, S.NVTX: nv,
            "META_DATA_EXPORT": pl.DataFrame({"name": ["EXPORT_PRODUCT_VERSION", "EXPORT_SCHEMA_VERSION"],
                                              "value": ["2025.3.2.0", "3.20.3"]})}  # fmt: skip


def build_nested(calls: int, seed: int = 0) -> dict[str, pl.DataFrame]:
    """Issue 10's shape: per call an outer range with a nested range, flushes outside ranges."""
    rng = np.random.default_rng(seed)
    strings = ["cudaLaunchKernel_v7000", SPLIT, FA3, FLUSH, "call", "launch"]
    sid = {s: i + 1 for i, s in enumerate(strings)}
    period = 200_000
    t0 = 1_000_000_000 + np.arange(calls, dtype=np.int64) * period
    arm = np.array([0, 1, 1, 0])[np.arange(calls) % 4]  # 0: FlashMLA split kernel, 1: fa3 kernel
    flush = np.arange(calls) % 2 == 0  # a flush before every other call, outside every range
    n_launch = flush.astype(np.int64) + 1
    total = int(n_launch.sum())
    call_of = np.repeat(np.arange(calls), n_launch)
    first = np.cumsum(n_launch) - n_launch
    slot = np.arange(total) - np.repeat(first, n_launch) + np.where(flush[call_of], 0, 1)  # 0 = flush
    api_start = t0[call_of] + 1_000 + slot * 15_000 + rng.integers(0, 500, total)
    api_end = api_start + 4_000 + rng.integers(0, 2_000, total)
    dur = np.where(slot == 0, 30_000, 40_000 + rng.integers(0, 4_000, total))
    gpu_start = api_end + 3_000 + slot * 45_000
    kname = np.where(slot == 0, sid[FLUSH], np.where(arm[call_of] == 1, sid[FA3], sid[SPLIT]))
    corr = np.arange(1, total + 1, dtype=np.int64)
    gtid, gpid = global_tid(PID, TID), global_pid(PID)
    runtime = pl.DataFrame({"start": api_start, "end": api_end, "eventClass": np.zeros(total, np.int64),
                            "globalTid": np.full(total, gtid), "correlationId": corr,
                            "nameId": np.full(total, sid["cudaLaunchKernel_v7000"]), "returnValue": np.zeros(total, np.int64)})  # fmt: skip
    kernel = pl.DataFrame({"start": gpu_start, "end": gpu_start + dur, "deviceId": np.zeros(total, np.int64),
                           "contextId": np.ones(total, np.int64), "streamId": np.full(total, 7),
                           "correlationId": corr, "globalPid": np.full(total, gpid),
                           "demangledName": kname, "shortName": kname, "mangledName": kname,
                           "gridX": np.full(total, 132), "gridY": np.ones(total, np.int64), "gridZ": np.ones(total, np.int64),
                           "blockX": np.full(total, 256), "blockY": np.ones(total, np.int64),
                           "blockZ": np.ones(total, np.int64), "registersPerThread": np.full(total, 168),
                           "staticSharedMemory": np.where(slot == 0, 0, 16), "dynamicSharedMemory": np.where(slot == 0, 0, 230_400),
                           "gridId": np.arange(1000, 1000 + total, dtype=np.int64)})  # fmt: skip
    # the call's kernel (slot 1, the last launch of the call) inside both ranges
    last = np.cumsum(n_launch) - 1
    inner_start, inner_end = api_start[last] - 100, api_end[last] + 100
    outer_start, outer_end = inner_start - 300, inner_end + 300
    nv = pl.concat([
        pl.DataFrame({"start": outer_start, "end": outer_end, "eventType": S.NVTX_PUSHPOP, "textId": sid["call"]}),
        pl.DataFrame({"start": inner_start, "end": inner_end, "eventType": S.NVTX_PUSHPOP, "textId": sid["launch"]}),
    ]).sort("start").with_columns(globalTid=pl.lit(gtid), color=pl.lit(255))  # fmt: skip
    return {"StringIds": pl.DataFrame({"id": list(sid.values()), "value": list(sid)}), S.KERNEL: kernel,
            S.RUNTIME: runtime, S.NVTX: nv,
            "META_DATA_EXPORT": pl.DataFrame({"name": ["EXPORT_PRODUCT_VERSION", "EXPORT_SCHEMA_VERSION"],
                                              "value": ["2025.3.2.0", "3.20.3"]})}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--shape", choices=("sweep", "nested"), default="sweep")
    ap.add_argument("--calls", type=int, help="calls (default: 500,000 for sweep, 200,000 for nested)")
    args = ap.parse_args()
    t = time.perf_counter()
    tables = build_nested(args.calls or 200_000) if args.shape == "nested" else build(args.calls or 500_000)
    write_export(args.out, tables, overwrite=True)
    n = tables[S.KERNEL].height
    print(f"{args.out}: {n:,} kernels, {tables[S.RUNTIME].height:,} API rows, {tables[S.NVTX].height:,} NVTX rows, "
          f"{args.out.stat().st_size / 1e6:.0f} MB in {time.perf_counter() - t:.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
