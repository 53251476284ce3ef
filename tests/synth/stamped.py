"""Stamped run folders as ``traceattr profile`` and the runner write them (docs/phases.md, runner/stamps.py):
trace.sqlite (nsys's DDL), kernels.parquet, runner.json with its ``stamps`` entries, ``stamps/NNN.npy`` and
``stamps/index.json``. The kernel is shaped as examples/split_mla's (a split kernel, then a reduce kernel or
an in-kernel merge by the last CTA to arrive); its times are made up, of the H200's order, not measured.

Each call's kernels get nsys times; each CTA's stamps are those times on the GPU clock (``nsys − OFFSET``,
with a drift of ``SKEW_PPM``), so the alignment has a real offset and skew to find.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.synth.builder import TraceBuilder
from traceattr.analysis.calls import calls as call_table
from traceattr.analysis.rounds import Capture, Row
from traceattr.attribution.engine import attribute
from traceattr.core.callnames import DOMAIN, CallName
from traceattr.core.records import RunnerRecord
from traceattr.core.shapes import parse_shape
from traceattr.runner.plan import arm_letters, iteration_order
from traceattr.trace.loader import load_trace

REDUCE, INKERNEL = "split-mla[merge=reduce]", "split-mla[merge=inkernel]"
SPLIT_BOUNDS = ("begin", "tile_loaded", "first_mma", "loop_done", "stored", "merged")
REDUCE_BOUNDS = ("begin", "merged")
WIDTH = len(SPLIT_BOUNDS) + 1  # the last column: the SM id
ROWS = (Row("q1_ctx8k", parse_shape("q1_ctx8k").name), Row("q8_ctx32k", parse_shape("q8_ctx32k").name))
OFFSET = -1_796_411_153_400_000_000  # nsys time = GPU time + OFFSET (a real %globaltimer is ~1.8e18 ns)
SKEW_PPM = -8.0  # the H200's was −8.1 ppm
SPLIT_KERNEL, REDUCE_KERNEL = "split_mla_split_kv", "split_mla_reduce"  # nsys's names: the stamps' names are in them


@dataclass(frozen=True)
class Kernel:
    """One kernel run of a call: nsys's start and end, and each CTA's stamps on nsys's axis (0: never written)."""

    kernel: str  # the stamp layout's name
    start: int
    end: int
    stamps: np.ndarray  # [ctas, boundaries], nsys ns
    sm: np.ndarray  # [ctas]


def _ctas(shape: str) -> int:
    return 16 if shape.startswith("q1_") else 32


def _loop_ns(shape: str) -> float:
    return {ROWS[0].shape: 36_000.0, ROWS[1].shape: 148_000.0}.get(shape, 40_000.0)


def call_kernels(arm: str, shape: str, t0: int, rng: np.random.Generator) -> list[Kernel]:
    """The kernels of one call starting at nsys time *t0*: split (+ reduce for the reduce arm)."""
    ctas = _ctas(shape)
    inkernel = "inkernel" in arm  # the arm label names the merge: split-mla[merge=inkernel], or a label
    begin = 600 + 15 * np.arange(ctas) + rng.normal(0, 20, ctas)
    steps = np.column_stack([
        begin,
        rng.normal(6_000 if not inkernel else 5_500, 150, ctas),  # the first tile of a flushed L2
        rng.normal(1_400, 40, ctas),
        rng.normal(_loop_ns(shape) * (0.98 if inkernel else 1.0), 400, ctas),
        rng.normal(1_500 if not inkernel else 1_300, 60, ctas),
        np.full(ctas, 30.0),  # a CTA that does not merge stamps "merged" right after its store
    ])  # fmt: skip
    ends = np.cumsum(steps, axis=1)
    if inkernel:  # the last CTA to arrive merges every split: 12 µs on its critical path
        last = int(np.argmax(ends[:, -2]))
        ends[last, -1] += 12_000 + rng.normal(0, 100)
    split_end = int(ends.max()) + 400
    sm = (np.arange(ctas) * 7) % 132
    out = [Kernel("split_kv", t0, t0 + split_end, (t0 + ends).astype(np.int64), sm)]
    if not inkernel:
        r0 = t0 + split_end + 1_300 + int(rng.normal(0, 30))  # the gap before the reduce kernel
        reds = 4
        rb = 500 + 10 * np.arange(reds) + rng.normal(0, 10, reds)
        rend = np.cumsum(np.column_stack([rb, rng.normal(3_000, 40, reds)]), axis=1)
        out.append(Kernel("reduce", r0, r0 + int(rend.max()) + 330, (r0 + rend).astype(np.int64), np.arange(reds) * 11))
    return out


FLOOR_REPS = 9
EMPTY_KERNEL = "empty_kernel"


def _floor_probes(b: TraceBuilder, dom: int, arm: str, shape: str, now: int, rng: np.random.Generator) -> int:
    """The floor probes of *arm* on *shape* as the runner launches them (runner.stamps): each rep alone in its range;
    the empty kernel ~0.55 µs, one tile ~14 µs of split kernel (+ 3 µs of reduce kernel, 20 µs later)."""
    for probe in ("empty", "one_tile"):
        for rep in range(FLOOR_REPS):
            message = f"floor arm={arm} probe={probe} shape={shape} rep={rep}"
            b.push_range(tid=1, start=now, end=now + 4_000, message=message, domain=dom)
            if probe == "empty":
                kernels = [(EMPTY_KERNEL, 550 + int(rng.normal(0, 15)))]
            else:
                kernels = [(SPLIT_KERNEL, 14_000 + int(rng.normal(0, 200)))]
                if "inkernel" not in arm:
                    kernels.append((REDUCE_KERNEL, 3_000 + int(rng.normal(0, 40))))
            t = now + 10_000
            for k, (name, dur) in enumerate(kernels):
                b.launch(tid=1, start=now + 500 + 500 * k, end=now + 900 + 500 * k, kernel=name, gpu_start=t,
                         gpu_end=t + dur)  # fmt: skip
                t += dur + 20_000
            now = t + 20_000
    return now


def runner_json(arms: tuple[str, ...], rows: tuple[Row, ...], stamps: list[dict[str, object]]) -> dict[str, object]:
    """runner.json as the runner writes it for an instrumented plug-in (both arms checked against the reference)."""
    shapes = {r.shape: {"backends": {a: {"status": "ok", "relative_error": 0.0017} for a in arms},
                        "clocks": {"sm_clock_mhz_median": 1980, "sm_clock_max_mhz": 1980, "fraction": 1.0}}
              for r in rows}  # fmt: skip
    info = {a: {"backend": "split-mla", "options": {"merge": "inkernel" if "inkernel" in a else "reduce"},
                "program": None} for a in arms}  # fmt: skip
    return {"gpu": {"name": "NVIDIA H200"}, "shapes": shapes, "arms": info, "timed": True, "stamps": stamps,
            "protocol": {"between": "flush", "order": "abba", "flush_bytes": 256 << 20, "hold": "host",
                         "lead": True}}  # fmt: skip


def stamped_folder(
    folder: Path, arms: tuple[str, ...] = (REDUCE, INKERNEL), *, rows: tuple[Row, ...] = ROWS, iters: int = 8,
    seed: int = 0, order: str = "abba", floors: bool = True,
) -> Capture:  # fmt: skip
    """A stamped run folder in *folder* (created), and the round's record of it as a capture; with *floors*, each
    arm's floor probes after each row's calls (9 reps of ``empty`` and ``one_tile``)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    b = TraceBuilder()
    dom = b.domain(DOMAIN, tid=1)
    letters = arm_letters(arms)
    now = 10_000_000
    runs: dict[tuple[str, str], list[tuple[int, list[Kernel]]]] = {}
    for row in rows:
        if order == "abba":
            sequence = [(i, arm) for i in range(iters) for arm in iteration_order(arms, i)]
        else:
            sequence = [(i, arm) for arm in arms for i in range(iters)]
        for i, arm in sequence:
            b.push_range(tid=1, start=now, end=now + 8_000, message=CallName(arm, row.shape, letters[arm], i).message,
                         domain=dom)  # fmt: skip
            kernels = call_kernels(arm, row.shape, now + 20_000, rng)
            for k, kern in enumerate(kernels):
                name = SPLIT_KERNEL if kern.kernel == "split_kv" else REDUCE_KERNEL
                b.launch(tid=1, start=now + 1_000 + 1_000 * k, end=now + 1_500 + 1_000 * k, kernel=name,
                         gpu_start=kern.start, gpu_end=kern.end, grid=(len(kern.sm), 1, 1))  # fmt: skip
            runs.setdefault((arm, row.shape), []).append((i, kernels))
            now = kernels[-1].end + 60_000
        for arm in arms if floors else ():
            now = _floor_probes(b, dom, arm, row.shape, now, rng)
    trace = b.write(folder / "trace.sqlite", gpu_name="NVIDIA H200", cc=(9, 0))
    att = attribute(load_trace(trace))
    att.ops_lazy().collect().write_parquet(folder / "kernels.parquet")
    entries = _write_stamps(folder, runs)
    content = runner_json(arms, rows, entries)
    (folder / "runner.json").write_text(json.dumps(content), encoding="utf-8")
    return Capture(0, call_table(att), RunnerRecord.from_json(content), str(folder), order, attribution=att)


def _write_stamps(folder: Path, runs: dict[tuple[str, str], list[tuple[int, list[Kernel]]]]) -> list[dict[str, object]]:
    """stamps/NNN.npy per (arm, shape) and stamps/index.json, as runner.stamps.StampLog writes them."""
    (folder / "stamps").mkdir()
    entries: list[dict[str, object]] = []
    everything = np.concatenate([k.stamps.reshape(-1) for calls in runs.values() for _, ks in calls for k in ks])
    base = everything.min()
    for n, ((arm, shape), calls) in enumerate(runs.items()):
        layout = [(k.kernel, SPLIT_BOUNDS if k.kernel == "split_kv" else REDUCE_BOUNDS, len(k.sm)) for k in calls[0][1]]
        rows = sum(r for _, _, r in layout)
        a = np.zeros((len(calls), rows, WIDTH), dtype=np.int64)
        for c, (_, kernels) in enumerate(calls):
            r0 = 0
            for k in kernels:
                gpu = k.stamps - OFFSET
                drift = np.round((gpu - (base - OFFSET)) * SKEW_PPM * 1e-6).astype(np.int64)
                a[c, r0 : r0 + len(k.sm), : k.stamps.shape[1]] = gpu - drift
                a[c, r0 : r0 + len(k.sm), WIDTH - 1] = k.sm
                r0 += len(k.sm)
        name = f"{n:03d}.npy"
        np.save(folder / "stamps" / name, a)
        entries.append({"file": name, "arm": arm, "shape": shape, "iters": [i for i, _ in calls], "layout": 1,
                        "width": WIDTH, "kernels": [{"kernel": k, "boundaries": list(bs), "rows": r}
                                                    for k, bs, r in layout]})  # fmt: skip
    (folder / "stamps" / "index.json").write_text(json.dumps(entries), encoding="utf-8")
    return entries


BASELINE, CANDIDATE = "reduce=fa3", "inkernel=fa3[splits=4]"  # labels over a built-in: the plug-in is not installed


def stamped_round(folder: Path, *, captures: int = 3, report: bool = True) -> Path:
    """``traceattr round`` of the reduce kernel against the in-kernel merge over :data:`ROWS`, each capture a
    stamped run folder (:func:`stamped_folder`); the round folder *folder* with its receipt, phases.md and page."""
    from dataclasses import replace

    from traceattr.jobs.round import RoundPlan, arm_label, run_round

    def executor(request, plan, on_line):  # type: ignore[no-untyped-def]
        rows = tuple(r for r in ROWS if r.shape in request.shapes)
        capture = stamped_folder(request.folder, tuple(arm_label(a) for a in request.arms), rows=rows,
                                 seed=request.index + 7, order=request.order)  # fmt: skip
        return replace(capture, index=request.index)

    plan = RoundPlan(rows=ROWS, baseline=BASELINE, candidate=CANDIDATE, folder=folder, captures=captures)
    run_round(plan, executor, report=report)
    return folder
