"""The process nsys runs: build inputs, check every arm, then time isolated calls.

Per shape: the inputs are built once (arms with ``page=``/``kv=`` get a
re-paged or re-typed copy of the same tokens; a DCP row's inputs are the
measured rank's shard). Each arm is prepared, run once and compared with the
torch reference (a wrong kernel is refused, never timed), the output of that
call is fingerprinted, then it is warmed up. The timed calls follow
``plan.order`` (:func:`traceattr.runner.plan.call_order`): ``abba`` runs
``iters`` iterations in which every arm runs once, in A B … order on even iterations
and reversed on odd ones (with ``plan.max_noise``, iterations are added ten at
a time, up to ``plan.max_iters``, until every arm's CUDA-event median is that
precise: nvbench's stopping rule, which never looks at how the arms compare);
``blocked`` runs each arm's calls back to back (added iterations: one more block
per arm, so the back-to-back medians are as precise as the interleaved ones).
Before every call runs ``plan.between``: the L2 flush in its own
``traceattr:flush`` range (``flush``; :mod:`traceattr.runner.flush`: a fill, then reads that evict), the flush and then another arm's call in
a ``traceattr:between`` range (``flush+ARM``: every arm sees the same
predecessor kernel), or nothing (``none``). With a hold (``plan.hold_us`` > 0),
each group starts with a kernel (``traceattr:hold``) that spins until the host
has enqueued the whole group behind it and sets a flag in pinned memory
(:mod:`traceattr.runner.hold`, nvbench's blocking kernel), so no call's time
includes the GPU waiting for its launch (a slow host otherwise shows up in the
CUDA-event times and as gaps inside a multi-kernel call). With ``plan.lead``
each group then runs its last arm once, untimed (``traceattr:lead``, the
``between`` work included): on the H200 the first call after the idle GPU ran
0.4–3.1% faster than the next one, so in ABBA the ratio depended on which arm
went first; behind a lead call no timed call is first. Each call is wrapped alone in a
``traceattr`` range whose message names the arm label, shape, arm letter and
iteration (:mod:`traceattr.core.callnames`). CUDA events around the call give a
second, independent time per call. Only the timed calls are captured
(cudaProfilerStart/Stop).

runner.json — the protocol ``profile``, ``compare`` and ``round`` read::

    gpu, versions, plan            the GPU's facts (max_sm_clock_mhz from NVML), library versions, the RunPlan
    protocol: {between: "flush" | "flush+ARM" | "none", order: "abba" | "blocked", flush_bytes: int,
               flush_kind: "fill+evict" | "fill" (runner.flush: what the flush does),
               graphs: bool, hold_us: float, hold: "host" | "none", hold_timeout_s: float,
               lead: bool}               lead: an untimed call of the group's last arm opens each group
    arms: {label: {backend: str, options: {name: value}, program: str}}
                                   equal program strings mean the same program: outputs must agree bitwise
    shapes: {canonical shape name: {
        kv_bytes: int,              bytes of the (rank's) KV cache as built
        clocks: {sm_clock_mhz_median, sm_clock_max_mhz, fraction, samples}
                                    NVML SM clock over this shape's timed calls; fraction = median / max;
                                    None values when NVML is unavailable (samples: 0)
        backends: {label: {arm: "A", status: "ok" | "unavailable" | "wrong" | "failed", reason?: str,
                           notes: [str], prepare_s: float, relative_error: float (vs the torch reference),
                           merge_relative_error?, lse_abs_error?: float (DCP rows: the merge vs a torch merge, the
                           base-2 LSE vs the torch one), dcp_path?: "flashinfer dcp" | "emulated" (DCP rows:
                           traceattr.backends.dcp; on "flashinfer dcp" relative_error and lse_abs_error are the
                           merged output's over the whole context, on "emulated" the measured rank's over its
                           shard), output_sha256: str (bitwise hash of the
                           output rows [rows, heads, 512] of one deterministic call, taken before timing)}}}}
    timed: bool
    stamps?: [{file, arm, shape, iters, layout, width, kernels}]  instrumented calls' phase stamps (runner.stamps)
    shapes[shape].floor?: {label: {probe: [µs]}}  floor probes' CUDA-event times (runner.stamps)
    events: [{backend: label, shape, iter, event_us}]   CUDA-event time of every timed call
    clocks: {...}                   the whole timed loop (samples, medians, temperature, power)
    shapes[shape].sampling: {iters, max_noise, noise: {label: fraction}}
                                    ABBA iterations run on the shape and each arm's median noise (half the
                                    95% interval of its CUDA-event median, relative) when they stopped
    shapes[shape].hold: {groups, timeouts, gpu_wait_us: {median, max}, group_enqueue_us: {median, max},
                         call_enqueue_us: {label: {median, max}}}
                                    how long the GPU waited for the host per group (the hold kernel's spin,
                                    GPU timer; groups 0 without a hold), the host's time to enqueue a group
                                    and one call of each arm (flush and predecessor included); after a
                                    second timeout in a row the shape's remaining groups run without it
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import nvtx
import torch

from traceattr.backends import current_device
from traceattr.backends.arms import Arm, arm_backend, check_arm, parse_arm, parse_arms
from traceattr.backends.base import SM_SCALE
from traceattr.backends.dcp import DcpCall, dcp_path, prepare_dcp
from traceattr.backends.inputs import as_shape, build_inputs
from traceattr.backends.reference import LSE_LIMIT, mla_reference_lse, relative_error
from traceattr.core.callnames import BETWEEN, DOMAIN, FLUSH, HOLD, LEAD, WARMUP, CallName
from traceattr.core.errors import BackendUnsupported
from traceattr.core.precision import median_noise
from traceattr.core.progress import Progress, emit
from traceattr.core.shapes import Shape, parse_shape
from traceattr.runner.environment import ClockSampler, gpu_facts, versions
from traceattr.runner.flush import Flush
from traceattr.runner.hold import DEFAULT_TIMEOUT_S, HoldLog, HostHold
from traceattr.runner.plan import RunPlan, arm_letters, between_arm, call_order, event_directional, more_iterations
from traceattr.runner.stamps import StampLog, time_floor_probes


def say(message: str) -> None:
    """Progress for the parent process (it shows these lines while nsys runs)."""
    emit(Progress(message))


class Prepared:
    """An arm ready to time: its call, plus a CUDA graph of it in graph mode."""

    def __init__(self, call: Any, graphs: bool) -> None:
        self.call = call
        self.graph: torch.cuda.CUDAGraph | None = None
        if graphs:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                call.run()  # warm the allocator on the side stream before capture
            torch.cuda.current_stream().wait_stream(stream)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                call.run()

    def launch(self) -> None:
        if self.graph is not None:
            self.graph.replay()
        else:
            self.call.run()


def fingerprint(rows: torch.Tensor) -> str:
    """sha256 of the tensor's bytes, bit for bit."""
    data = rows.detach().contiguous().view(torch.uint8).cpu().numpy().tobytes()
    return hashlib.sha256(data).hexdigest()


class ShapeInputs:
    """One shape's inputs, their page/dtype variants, and a reference per KV dtype, each built once."""

    def __init__(self, shape: Shape, plan: RunPlan) -> None:
        self.base = build_inputs(shape.rank_share() if shape.dcp > 1 else shape, shuffle=plan.shuffle, seed=plan.seed)
        self.variants: dict[tuple[int, str], Any] = {}
        self.references: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def for_shape(self, call_shape: Shape) -> Any:
        key = (call_shape.page, call_shape.kv_dtype)
        if key not in self.variants:
            self.variants[key] = as_shape(self.base, call_shape)
        return self.variants[key]

    def reference(self, inputs: Any) -> torch.Tensor:
        """The torch outputs of *inputs*' requests."""
        return self._reference(inputs)[0]

    def reference_lse(self, inputs: Any) -> torch.Tensor:
        """Their base-2 log-sum-exp ``[rows, heads]``: what a DCP merge weighs each rank's partial by."""
        return self._reference(inputs)[1]

    def _reference(self, inputs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        # re-paging keeps every token: one reference per KV dtype
        if inputs.shape.kv_dtype not in self.references:
            say("computing the torch reference")
            self.references[inputs.shape.kv_dtype] = mla_reference_lse(inputs, inputs.layout.requests(), SM_SCALE)
        return self.references[inputs.shape.kv_dtype]


def prepare_arm(arm: Arm, shape: Shape, data: ShapeInputs, seed: int) -> tuple[Any, Any]:
    """(the arm's call on *shape*, its inputs); a DCP row's call is the rank's call plus the merge."""
    call_shape = arm.call_shape(shape)
    inputs = data.for_shape(call_shape)
    backend = arm_backend(arm)
    if shape.dcp == 1:
        return backend.prepare(call_shape, inputs), inputs
    return prepare_dcp(backend, shape, inputs, seed), inputs


def check_output(arm: Arm, shape: Shape, call: Any, inputs: Any, data: ShapeInputs, plan: RunPlan,
                 entry: dict[str, Any]) -> str | None:  # fmt: skip
    """Run *call* once: fingerprint its output and compare it with the reference; the refusal, or None."""
    rows = call.output_rows(call.run())
    torch.cuda.synchronize()
    entry["output_sha256"] = fingerprint(rows)
    if not plan.validate:
        return None
    limit = plan.tolerance[inputs.shape.kv_dtype]
    if isinstance(call, DcpCall):
        shard = lambda: (data.reference(inputs), data.reference_lse(inputs))  # noqa: E731
        return call.check(rows, shard, limit, LSE_LIMIT[inputs.shape.kv_dtype], entry)
    err = relative_error(rows, data.reference(inputs))
    entry["relative_error"] = err
    if not err <= limit:
        return f"output differs from the reference: relative error {err:.3g} > {limit}"
    return None


def run_between(flush: Flush | None, predecessor: Prepared | None, annotate: bool = False) -> None:
    """What runs before every call (``plan.between``): the flush, then the predecessor's call; each in its own
    range when *annotate* (before a timed call), inside the caller's range otherwise (warm-up, lead)."""
    if flush is not None:
        with nvtx.annotate(FLUSH, domain=DOMAIN) if annotate else contextlib.nullcontext():
            flush.run()
    if predecessor is not None:
        with nvtx.annotate(BETWEEN, domain=DOMAIN) if annotate else contextlib.nullcontext():
            predecessor.launch()


def run(plan: RunPlan, folder: Path) -> dict[str, Any]:
    """Every shape of *plan*: build its inputs, check and warm every arm, then time them all (runner.json)."""
    device, why = current_device()
    if device is None:
        raise SystemExit(f"traceattr runner: {why}")
    facts = gpu_facts()
    arms = parse_arms(plan.arms)
    before = between_arm(plan.between)
    between = parse_arm(before) if before else None
    results = runner_header(plan, facts, arms)
    flush = Flush(plan.flush_bytes, plan.flush_kind) if plan.between != "none" else None  # before any input
    letters = arm_letters(tuple(a.label for a in arms))
    timed_shapes: list[ShapeReady] = []
    for shape_name in plan.shapes:
        shape = parse_shape(shape_name)
        say(f"shape {shape.name}: building inputs")
        data = ShapeInputs(shape, plan)
        report: dict[str, Any] = {"kv_bytes": data.base.kv_bytes(), "backends": {}}
        results["shapes"][shape.name] = report
        ready: dict[str, Prepared] = {}
        for arm in arms:
            prepared = prepare_checked(arm, shape, data, plan, device, report, letters)
            if prepared is not None:
                ready[arm.label] = prepared
        predecessor = None
        if ready and between is not None:
            predecessor = prepare_predecessor(between, shape, data, plan, report, ready)
            if predecessor is None:
                ready = {}
        if ready:
            timed_shapes.append(ShapeReady(shape, data, ready, predecessor))
        else:
            del data
    if not timed_shapes:
        results["timed"] = False
        return results
    stamps = StampLog()  # phase stamps of instrumented calls (runner.stamps, docs/phases.md)
    events, clocks = time_shapes(timed_shapes, plan, tuple(a.label for a in arms), letters, flush, facts, results,
                                 stamps)  # fmt: skip
    if index := stamps.write(folder):  # only instrumented arms add the key: runner.json is otherwise unchanged
        results["stamps"] = index
    results["timed"] = True
    results["events"] = events
    results["clocks"] = clocks
    return results


def runner_header(plan: RunPlan, facts: dict[str, Any], arms: tuple[Arm, ...]) -> dict[str, Any]:
    """runner.json's first entries: the GPU, versions, the plan, the protocol as it runs, the arms."""
    return {
        "gpu": facts,
        "versions": versions(),
        "plan": asdict(plan),
        "protocol": {
            "between": plan.between,
            "order": plan.order,
            "flush_bytes": plan.flush_bytes,
            "flush_kind": plan.flush_kind,
            "graphs": plan.graphs,
            "hold_us": plan.hold_us,
            "hold": "host" if plan.hold_us > 0 else "none",
            "hold_timeout_s": DEFAULT_TIMEOUT_S,
            "lead": plan.lead,
        },
        "arms": {a.label: a.identity() for a in arms},
        "shapes": {},
    }


@dataclass
class ShapeReady:
    """A shape whose arms passed their checks: what its timed loop needs."""

    shape: Shape
    data: ShapeInputs  # kept alive until the shape is timed
    ready: dict[str, Prepared]
    predecessor: Prepared | None


def prepare_checked(arm: Arm, shape: Shape, data: ShapeInputs, plan: RunPlan, device: Any,
                    report: dict[str, Any], letters: dict[str, str]) -> Prepared | None:  # fmt: skip
    """*arm* on *shape* prepared, checked against the reference and warmed up; None when it cannot be timed
    (its entry in *report* says why: unavailable, wrong or failed)."""
    name = arm.label
    entry: dict[str, Any] = {"arm": letters[name]}
    report["backends"][name] = entry
    try:
        call_plan = check_arm(arm, shape, device)
    except BackendUnsupported as err:
        entry.update(status="unavailable", reason=str(err).split(": ", 1)[-1])
        say(f"{name}: unavailable: {entry['reason']}")
        return None
    entry["notes"] = list(call_plan.notes)
    if shape.dcp > 1:
        entry["dcp_path"] = dcp_path(arm_backend(arm))
    try:
        started = time.time()
        say(f"{name}: preparing (first use compiles)")
        call, inputs = prepare_arm(arm, shape, data, plan.seed)
        refusal = check_output(arm, shape, call, inputs, data, plan, entry)
        entry["prepare_s"] = round(time.time() - started, 1)
        if refusal:
            entry.update(status="wrong", reason=refusal)
            say(f"{name}: REFUSED: {refusal}")
            return None
        prepared = Prepared(call, plan.graphs or arm.graphs)
        # not annotated: the NVTX domain must first appear inside the capture range,
        # or nsys's export may miss its DomainCreate row (and with it the name)
        for _ in range(plan.warmup):
            prepared.launch()
        torch.cuda.synchronize()
        entry["status"] = "ok"
        say(f"{name}: ok (relative error {entry.get('relative_error', float('nan')):.2g})")
        return prepared
    except Exception as exc:  # an arm that breaks is reported, the others still run
        entry.update(status="failed", reason=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
        entry["traceback"] = traceback.format_exc(limit=4)
        say(f"{name}: FAILED: {entry['reason']}")
        return None


def prepare_predecessor(between: Arm, shape: Shape, data: ShapeInputs, plan: RunPlan, report: dict[str, Any],
                        ready: dict[str, Prepared]) -> Prepared | None:  # fmt: skip
    """The same predecessor for every arm (``flush+ARM``): prepared once per shape, never timed; None when it
    fails, and then every ready arm of the shape is marked failed."""
    try:
        call, _ = prepare_arm(between, shape, data, plan.seed)
        predecessor = Prepared(call, plan.graphs or between.graphs)
        predecessor.launch()
        torch.cuda.synchronize()
        return predecessor
    except Exception as exc:
        reason = f"--between {plan.between}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        for name in ready:
            report["backends"][name].update(status="failed", reason=reason)
        say(f"shape {shape.name}: not timed: {reason}")
        return None


def time_shapes(timed_shapes: list[ShapeReady], plan: RunPlan, labels: tuple[str, ...], letters: dict[str, str],
                flush: Flush | None, facts: dict[str, Any],
                results: dict[str, Any],
                stamps: StampLog | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:  # fmt: skip
    """Time every ready shape inside one capture range, each shape's clocks, sampling and hold into *results*;
    (every timed call's CUDA-event time, the whole loop's clocks)."""
    events: list[dict[str, Any]] = []
    max_sm = facts.get("max_sm_clock_mhz")
    # released by the host once the group is enqueued; hold_us > 0 only turns it on (no fixed length any more)
    holder = HostHold(DEFAULT_TIMEOUT_S) if plan.hold_us > 0 else None
    with ClockSampler() as clocks:
        if plan.capture_range:
            torch.cuda.profiler.start()
        for item in timed_shapes:
            shape, ready = item.shape, item.ready
            order_arms = tuple(a for a in labels if a in ready)
            emit(
                Progress.timing_of(
                    shape.name, f"{len(ready)} arms × {plan.iters} calls ({plan.order}, between: {plan.between})"
                )
            )
            torch.cuda.synchronize()
            window_start = time.time()
            clocks.sample()  # inside the window: even a shape shorter than the period gets two samples
            # one untimed group inside the capture first: the first launches under nsys can take the host ~1 s
            # (seen on the H200: the first shape's first hold timed out), which must not land in a timed group
            with nvtx.annotate(WARMUP, domain=DOMAIN):
                for name in order_arms:
                    run_between(flush, item.predecessor)
                    ready[name].launch()
            torch.cuda.synchronize()
            timing = ShapeTiming(shape, ready, item.predecessor, order_arms, letters, flush, holder, events,
                                 stamps=stamps or StampLog())  # fmt: skip
            done, noise, log = timing.run(plan)
            clocks.sample()
            timed_report = results["shapes"][shape.name]
            if floor := time_floor_probes(ready, shape.name, flush):
                timed_report["floor"] = floor
            timed_report["clocks"] = clocks.window(window_start, time.time(), max_sm)
            timed_report["sampling"] = {"iters": done, "max_noise": plan.max_noise,
                                        "noise": {k: None if math.isnan(v) else round(v, 6) for k, v in noise.items()}}  # fmt: skip
            timed_report["hold"] = log.summary()
        torch.cuda.synchronize()
        if plan.capture_range:
            torch.cuda.profiler.stop()
    return events, clocks.summary(max_sm)


@dataclass
class ShapeTiming:
    """One shape's timed loop: groups of calls (ABBA iterations, or blocks) until the stopping rule says enough."""

    shape: Shape
    ready: dict[str, Prepared]
    predecessor: Prepared | None
    order_arms: tuple[str, ...]
    letters: dict[str, str]
    flush: Flush | None
    holder: HostHold | None
    events: list[dict[str, Any]]  # every timed call's CUDA-event time is appended here
    stamps: StampLog = field(default_factory=StampLog)
    times: dict[str, list[float]] = field(default_factory=dict)
    log: HoldLog = field(default_factory=HoldLog.empty)
    held: HostHold | None = None
    last_timed_out: bool = False

    def run(self, plan: RunPlan) -> tuple[int, dict[str, float], HoldLog]:
        """(iterations run, each arm's median noise, the hold's log)."""
        self.times = {name: [] for name in self.order_arms}
        self.held = self.holder
        done, todo = 0, plan.iters
        noise: dict[str, float] = {}
        while todo:
            for group in call_order(self.order_arms, todo, plan.order, start=done):
                self.group(group, plan)
            done += todo
            noise = {name: median_noise(v) for name, v in self.times.items()}
            # stop early when more calls cannot help: the orders disagree far beyond any gate, or the
            # hold gave up (the host sets the spread); the round names the cause
            todo = more_iterations(done, noise, plan, directional=event_directional(self.times, self.order_arms),
                               host_waited=self.holder is not None and self.held is None)  # fmt: skip
            if todo:
                worst = max(noise, key=lambda k: math.inf if math.isnan(noise[k]) else noise[k])
                say(f"noise {self.shape.name}: {done} iterations, {worst} median ±{noise[worst]:.2%}: {todo} more")
        return done, noise, self.log

    def group(self, group: list[tuple[str, int]], plan: RunPlan) -> None:
        """One group of timed calls, in flight alone: the hold, the lead, the calls, then their times."""
        held, flush, predecessor = self.held, self.flush, self.predecessor
        if held is not None:  # the GPU spins until the host has enqueued the group (nvbench)
            with nvtx.annotate(HOLD, domain=DOMAIN):
                held.hold()
        if plan.lead:  # the group's last arm once, untimed: every timed call follows a call
            with nvtx.annotate(LEAD, domain=DOMAIN):
                run_between(flush, predecessor)
                self.ready[group[-1][0]].launch()
        timed = []
        for name, r in group:
            enqueue_start = time.perf_counter_ns()
            run_between(flush, predecessor, annotate=True)
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            message = CallName(name, self.shape.name, self.letters[name], r).message
            with nvtx.annotate(message, domain=DOMAIN):
                start.record()
                self.ready[name].launch()
                stop.record()
            self.stamps.after_call(name, self.shape.name, r, self.ready[name].call)  # outside the call's range
            self.log.add_call(name, time.perf_counter_ns() - enqueue_start)
            timed.append((name, r, start, stop))
        if held is not None:
            held.release()
        torch.cuda.synchronize()  # one group in flight at a time
        if held is not None:
            released = held.result()
            self.log.add(released)
            if released.timed_out and self.last_timed_out:  # twice running: a call synchronizes inside
                say(f"hold {self.shape.name}: timed out twice after {DEFAULT_TIMEOUT_S:g} s (a call "
                    "synchronizes?); the shape's remaining groups run without it")  # fmt: skip
                self.held = None
            self.last_timed_out = released.timed_out
        for name, r, start, stop in timed:  # read now: the stopping rule needs them
            us = round(start.elapsed_time(stop) * 1000.0, 3)
            self.times[name].append(us)
            self.events.append({"backend": name, "shape": self.shape.name, "iter": r, "event_us": us})


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        raise SystemExit("usage: python -m traceattr.runner PLAN.json RUN_FOLDER")
    plan = RunPlan.read(Path(args[0]))
    folder = Path(args[1])
    results = run(plan, folder)
    (folder / plan.results).write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    say(f"wrote {folder / plan.results}")
