"""Timing dispatchers along a trajectory on the GPU, and checking their outputs against eager calls.

Per step every contender (a fixed arm is a dispatcher over a one-segment table) is prepared once
(choose + re-plan, host), then replayed in *iters* ABBA iterations, the contenders' order reversed every other
round (ABBA), with the caller's cache flush before each call outside the timed range; each call is
timed by CUDA events around the replay alone and wrapped in an NVTX range
``decode step=<i> arm=<label>`` so nsys can confirm the events. The flush is the caller's (the
runner's :class:`~traceattr.runner.flush.Flush`): runtime does not import the runner.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from traceattr.runtime.dispatcher import ByQuery, Dispatcher
from traceattr.runtime.graphs import StaticInputs
from traceattr.runtime.trajectory import Step


@dataclass
class TrajectoryTimes:
    """GPU µs per contender, step and iteration; the arm each contender chose per step; host ns per step."""

    labels: tuple[str, ...]
    steps: tuple[Step, ...]
    iters: int
    times_us: dict[str, list[list[float]]] = field(default_factory=dict)  # label -> [step][iteration]
    chosen: dict[str, list[str]] = field(default_factory=dict)
    host_ns: dict[str, dict[str, list[int]]] = field(default_factory=dict)  # label -> choose/replan/launch
    equal: dict[str, list[bool]] = field(default_factory=dict)  # label -> per step: bitwise equal to eager
    wall_s: float = 0.0


def time_trajectory(contenders: Mapping[str, Dispatcher | ByQuery], steps: Sequence[Step], *, iters: int,
                    flush: Callable[[], None], check: Callable[[str, Step, Any], bool] | None = None) -> TrajectoryTimes:  # fmt: skip
    """Time every contender at every step (see the module doc); *check(arm, step, out)* compares outputs."""
    labels = tuple(contenders)
    run = TrajectoryTimes(labels, tuple(steps), iters)
    for label in labels:
        run.times_us[label] = []
        run.equal[label] = []
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters * len(labels))
    ]
    t_start = time.perf_counter()
    # nsys --capture-range=cudaProfilerApi records from here to the stop below (a no-op without a profiler)
    torch.cuda.profiler.start()
    for i, step in enumerate(steps):
        for d in contenders.values():
            d.prepare(step)
        k = 0
        slots: dict[str, list[int]] = {label: [] for label in labels}
        for r in range(iters):
            order = labels if r % 2 == 0 else labels[::-1]
            for label in order:
                flush()
                torch.cuda.nvtx.range_push(f"decode step={i} arm={label} iter={r}")
                start, end = events[k]
                start.record()
                contenders[label].launch()
                end.record()
                torch.cuda.nvtx.range_pop()
                slots[label].append(k)
                k += 1
        torch.cuda.synchronize()
        for label in labels:
            run.times_us[label].append([events[j][0].elapsed_time(events[j][1]) * 1e3 for j in slots[label]])
            if check is not None:
                d = contenders[label]
                run.equal[label].append(check(d.current or "", step, d.arms[d.current or ""].replay()))
    torch.cuda.profiler.stop()
    run.wall_s = time.perf_counter() - t_start
    for label, d in contenders.items():
        run.chosen[label] = d.chosen[-len(steps) :]
        run.host_ns[label] = {"choose": d.times.choose_ns[-len(steps) :], "replan": d.times.replan_ns[-len(steps) :]}
    return run


@dataclass(frozen=True)
class HostProfile:
    """A dispatcher's host time per step with *layers* replays per plan, against the GPU time it serves.

    Medians per step for the host parts (re-plan per arm: flashinfer's ``plan()`` for fa3 arms, a
    ``cache_seqlens`` copy for flashmla); means per step for GPU and wall time, so that the pipelined
    wall (total / steps) compares with them: pipelined ≈ GPU mean means the host work is hidden.
    """

    layers: int
    steps: int
    choose_us: float
    replan_us: dict[str, float]  # median per arm
    launch_us: float  # all the step's replays
    host_mean_us: float  # choose + re-plan + launch, mean per step
    gpu_mean_us: float  # the step's replays, CUDA events, mean per step
    serial_wall_mean_us: float  # prepare → launches → synchronize, every step
    pipelined_wall_mean_us: float  # prepare of step k+1 while the GPU runs step k; one sync at the end
    choose_loop_ns: float  # one choose() in a tight loop of 100k calls (the selection alone)


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    n = len(s)
    return (s[n // 2] + s[(n - 1) // 2]) / 2 if n else float("nan")


def host_profile(d: Dispatcher | ByQuery, steps: Sequence[Step], *, layers: int, repeat: int = 3) -> HostProfile:
    """Host split per step (choose / re-plan / launch) against the GPU time it serves; see :class:`HostProfile`."""
    seq = [s for _ in range(repeat) for s in steps]
    n0 = len(d.times.choose_ns)
    gpu, serial = [], []
    for step in seq:
        t0 = time.perf_counter_ns()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        d.prepare(step)
        start.record()
        d.launch(layers)
        end.record()
        end.synchronize()
        serial.append((time.perf_counter_ns() - t0) / 1e3)
        gpu.append(start.elapsed_time(end) * 1e3)
    choose = [x / 1e3 for x in d.times.choose_ns[n0:]]
    replan = [x / 1e3 for x in d.times.replan_ns[n0:]]
    launch = [x / 1e3 for x in d.times.launch_ns[n0:]]
    arms = d.chosen[n0:]
    by_arm = {a: _median([r for r, b in zip(replan, arms, strict=True) if b == a]) for a in dict.fromkeys(arms)}
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    for step in seq:
        d.prepare(step)
        d.launch(layers)
    torch.cuda.synchronize()
    pipelined = (time.perf_counter_ns() - t0) / 1e3 / len(seq)
    probe = steps[len(steps) // 2]
    t0 = time.perf_counter_ns()
    for _ in range(100_000):
        d.choose(probe)
    loop_ns = (time.perf_counter_ns() - t0) / 100_000
    n = len(seq)
    host = (sum(choose) + sum(replan) + sum(launch)) / n
    return HostProfile(layers, n, _median(choose), by_arm, _median(launch), host, sum(gpu) / n, sum(serial) / n,
                       pipelined, loop_ns)  # fmt: skip


def eager_output(arm_label: str, inputs: StaticInputs, step: Step) -> Any:
    """The arm's eager call (traceattr's own backends, as ``profile`` times it) on the same cache and queries.

    Batch 1 only: the eager layout gives request 0 the cache's first pages, as the slot layout does.
    """
    from traceattr.backends.arms import arm_backend, parse_arm
    from traceattr.backends.inputs import MLAInputs
    from traceattr.backends.layout import KvLayout
    from traceattr.core.shapes import Shape

    layout = inputs.layout
    if layout.batch != 1:
        raise ValueError("eager_output compares batch 1 only (the eager layout and the slot layout differ beyond)")
    arm = parse_arm(arm_label)
    shape = Shape(q=layout.q, ctx=step[0], heads=inputs.heads, batch=1, page=layout.page)
    eager_inputs = MLAInputs(shape, KvLayout(shape), inputs.kv, 1.0, inputs.q)
    call = arm_backend(arm).prepare(shape, eager_inputs)
    out = call.output_rows(call.run())
    torch.cuda.synchronize()
    return out


def bitwise_equal(a: Any, b: Any) -> bool:
    return bool(a.shape == b.shape and torch.equal(a.reshape(b.shape), b))


def device_record() -> dict[str, Any]:
    """The GPU and the versions a receipt names."""
    import importlib.metadata as md
    import platform

    def version(dist: str) -> str | None:
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            return None

    props = torch.cuda.get_device_properties(0)
    return {"name": props.name, "torch": torch.__version__, "cuda": torch.version.cuda,
            "python": platform.python_version(), "flashinfer": version("flashinfer-python"),
            "flash_mla": version("sgl-flash-mla")}  # fmt: skip
