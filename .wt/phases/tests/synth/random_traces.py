"""Random traces for property tests (hypothesis): nested push/pop ranges, start/end ranges crossing
them, calls on several threads and processes (some logged twice), ops on two streams, orphans;
written in the exact nsys DDL by :class:`TraceBuilder`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

from tests.synth.builder import TraceBuilder

KERNELS = ["fmhaSm100fKernel_QkvBfloat16OBfloat16HQk576HV512PagedKvDenseP64VarSeqQ8Kv128PersistentSwapsAbForGen",
           "void tensorrt_llm::kernels::fmhaReductionKernel<__nv_bfloat16>(Params)", "void other_kernel<int>(int)"]  # fmt: skip


@dataclass(frozen=True)
class Rng:
    tid: int
    start: int
    end: int | None
    style: str  # PushPop | StartEnd
    end_tid: int | None = None


@dataclass(frozen=True)
class Call:
    pid: int
    tid: int
    start: int
    end: int
    corr: int
    duplicated: bool  # logged twice, as old exports do (second row wider)


@dataclass(frozen=True)
class Op:
    pid: int
    corr: int | None  # None: launched before the slice (no API row)
    start: int
    end: int
    stream: int
    kernel: int


def nested(draw: st.DrawFn, tid: int, lo: int, hi: int, depth: int) -> list[Rng]:
    """Properly nested push/pop ranges inside [lo, hi] (siblings may touch)."""
    out: list[Rng] = []
    t = lo
    while depth > 0 and t < hi and draw(st.booleans()):
        s = draw(st.integers(t, hi))
        e = draw(st.integers(s, hi))
        out.append(Rng(tid, s, e, "PushPop"))
        if draw(st.booleans()):  # an identical twin: nsys's tie case
            out.append(Rng(tid, s, e, "PushPop"))
        out += nested(draw, tid, s, e, depth - 1)
        t = e if draw(st.booleans()) else min(hi, e + 1)
    return out


@st.composite
def traces(draw: st.DrawFn) -> tuple[list[Rng], list[Call], list[Op]]:
    horizon = 60
    threads = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3, unique=True))
    ranges: list[Rng] = []
    for tid in threads:
        ranges += nested(draw, tid, 0, horizon, depth=3)
        for _ in range(draw(st.integers(0, 2))):  # start/end ranges may overlap anything
            s = draw(st.integers(0, horizon))
            end_tid = draw(st.sampled_from([None, None, None, *threads]))
            ranges.append(Rng(tid, s, draw(st.integers(s, horizon + 5)), "StartEnd", end_tid))
    if ranges and draw(st.booleans()):  # one push/pop range never closed
        r = draw(st.sampled_from(ranges))
        ranges.append(Rng(r.tid, r.start, None, "PushPop"))
    calls: list[Call] = []
    ops: list[Op] = []
    corr = {1: 0, 2: 0}
    for _ in range(draw(st.integers(1, 14))):
        pid = draw(st.sampled_from([1, 2]))
        tid = draw(st.sampled_from(threads))
        s = draw(st.integers(0, horizon))
        corr[pid] += 1
        calls.append(Call(pid, tid, s, s + draw(st.integers(0, 4)), corr[pid], draw(st.booleans())))
        for _ in range(draw(st.integers(1, 2))):  # a graph launch makes several ops per call
            g = draw(st.integers(0, horizon + 20))
            ops.append(Op(pid, corr[pid], g, g + draw(st.integers(0, 15)), draw(st.integers(7, 8)),
                          draw(st.integers(0, 2))))  # fmt: skip
    for _ in range(draw(st.integers(0, 2))):  # orphans: a sliced capture
        g = draw(st.integers(0, horizon))
        ops.append(Op(1, 10_000 + g, g, g + 3, 7, 2))
    return ranges, calls, distinct(ops)


def distinct(ops: list[Op]) -> list[Op]:
    """*ops* without repeats: two ops alike in every column are one op written twice, which the loader
    counts once (trace.validate.drop_repeated_rows); no GPU runs two such kernels."""
    return list(dict.fromkeys(ops))


def write(path: Path, ranges: list[Rng], calls: list[Call], ops: list[Op]) -> None:
    b = TraceBuilder()
    doms = {}
    for pid in (1, 2):
        doms[pid] = b.domain("traceattr", tid=1, pid=pid)
    for i, r in enumerate(ranges):
        if r.style == "PushPop":
            b.push_range(tid=r.tid, start=r.start, end=r.end, message=f"r{i}", domain=doms[1], pid=1)
        else:
            b.start_end_range(tid=r.tid, start=r.start, end=r.end, message=f"r{i}", end_tid=r.end_tid, pid=1)
    for c in calls:
        b.api_call(tid=c.tid, start=c.start, end=c.end, name="cudaLaunchKernel", pid=c.pid, correlation=c.corr)
        if c.duplicated:
            b.api_call(
                tid=c.tid, start=c.start - 1, end=c.end + 1, name="cudaLaunchKernel", pid=c.pid, correlation=c.corr
            )
    for o in ops:
        b.kernel(corr=o.corr, kernel=KERNELS[o.kernel], gpu_start=o.start, gpu_end=o.end, stream=o.stream, pid=o.pid)
    b.write(path)
