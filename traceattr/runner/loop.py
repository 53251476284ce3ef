"""The process nsys runs: build inputs, check every backend, then time isolated calls.

Per shape: the inputs are built once; each available backend is prepared,
run once and compared with the torch reference (a wrong kernel is refused,
never timed), then warmed up. The timed loop runs ``iters`` rounds; in each
round every arm runs once, in A B … order on even rounds and reversed on odd
ones. Each call is preceded by an L2 flush in its own ``traceattr:flush``
range and wrapped alone in a ``traceattr`` range whose message names
backend, shape, arm and iteration (:mod:`traceattr.callnames`). CUDA events
around the call give a second, independent time per call for cross-checking
nsys. Only the timed loop is captured (cudaProfilerStart/Stop).
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import nvtx
import torch

from traceattr.backends import check, current_device, get_backend
from traceattr.backends.base import SM_SCALE
from traceattr.backends.inputs import build_inputs
from traceattr.backends.reference import mla_reference, relative_error
from traceattr.callnames import DOMAIN, FLUSH, CallName
from traceattr.errors import BackendUnsupported
from traceattr.runner.environment import ClockSampler, gpu_facts, versions
from traceattr.runner.plan import RunPlan, arm_letters, round_order
from traceattr.shapes import parse_shape


def say(message: str) -> None:
    """Progress for the parent process (it shows these lines while nsys runs)."""
    print(f"[traceattr] {message}", flush=True)


class Prepared:
    """A backend ready to time: its call, plus a CUDA graph of it in graph mode."""

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


def run(plan: RunPlan, folder: Path) -> dict[str, Any]:
    device, why = current_device()
    if device is None:
        raise SystemExit(f"traceattr runner: {why}")
    facts = gpu_facts()
    results: dict[str, Any] = {"gpu": facts, "versions": versions(), "plan": plan.__dict__, "shapes": {}}
    flush = torch.empty(plan.flush_bytes, dtype=torch.uint8, device="cuda")
    letters = arm_letters(plan.backends)
    events: list[dict[str, Any]] = []
    timed_shapes = []
    for shape_name in plan.shapes:
        shape = parse_shape(shape_name)
        say(f"shape {shape.name}: building inputs")
        inputs = build_inputs(shape, shuffle=plan.shuffle, seed=plan.seed)
        report: dict[str, Any] = {"kv_bytes": inputs.kv_bytes(), "backends": {}}
        reference = None
        ready: dict[str, Prepared] = {}
        for name in plan.backends:
            entry: dict[str, Any] = {"arm": letters[name]}
            report["backends"][name] = entry
            try:
                call_plan = check(name, shape, device)
            except BackendUnsupported as err:
                entry.update(status="unavailable", reason=str(err).split(": ", 1)[-1])
                say(f"{name}: unavailable: {entry['reason']}")
                continue
            entry["notes"] = list(call_plan.notes)
            try:
                started = time.time()
                say(f"{name}: preparing (first use compiles)")
                call = get_backend(name).prepare(shape, inputs)
                out = call.output_rows(call.run())
                torch.cuda.synchronize()
                entry["prepare_s"] = round(time.time() - started, 1)
                if plan.validate:
                    if reference is None:
                        say("computing the torch reference")
                        reference = mla_reference(inputs, inputs.layout.requests(), SM_SCALE)
                    err = relative_error(out, reference)
                    entry["relative_error"] = err
                    limit = plan.tolerance[shape.kv_dtype]
                    if not err <= limit:
                        entry.update(
                            status="wrong",
                            reason=f"output differs from the reference: relative error {err:.3g} > {limit}",
                        )
                        say(f"{name}: REFUSED: {entry['reason']}")
                        continue
                prepared = Prepared(call, plan.graphs)
                # not annotated: the NVTX domain must first appear inside the capture range,
                # or nsys's export may miss its DomainCreate row (and with it the name)
                for _ in range(plan.warmup):
                    prepared.launch()
                torch.cuda.synchronize()
                ready[name] = prepared
                entry["status"] = "ok"
                say(f"{name}: ok (relative error {entry.get('relative_error', float('nan')):.2g})")
            except Exception as exc:  # a backend that breaks is reported, the others still run
                entry.update(status="failed", reason=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
                entry["traceback"] = traceback.format_exc(limit=4)
                say(f"{name}: FAILED: {entry['reason']}")
        results["shapes"][shape.name] = report
        if ready:
            timed_shapes.append((shape, inputs, ready))
        else:
            del inputs
    if not timed_shapes:
        results["timed"] = False
        return results
    arms = tuple(b for b in plan.backends if any(b in r for _, _, r in timed_shapes))
    with ClockSampler() as clocks:
        if plan.capture_range:
            torch.cuda.profiler.start()
        for shape, _inputs, ready in timed_shapes:
            say(f"timing {shape.name}: {len(ready)} arms × {plan.iters} rounds")
            order_arms = tuple(a for a in arms if a in ready)
            for r in range(plan.iters):
                for name in round_order(order_arms, r):
                    with nvtx.annotate(FLUSH, domain=DOMAIN):
                        flush.zero_()
                    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    message = CallName(name, shape.name, letters[name], r).message
                    with nvtx.annotate(message, domain=DOMAIN):
                        start.record()
                        ready[name].launch()
                        stop.record()
                    events.append({"backend": name, "shape": shape.name, "iter": r, "_events": (start, stop)})
                torch.cuda.synchronize()  # one round in flight at a time
        torch.cuda.synchronize()
        if plan.capture_range:
            torch.cuda.profiler.stop()
    for e in events:
        start, stop = e.pop("_events")
        e["event_us"] = round(start.elapsed_time(stop) * 1000.0, 3)
    results["timed"] = True
    results["events"] = events
    results["clocks"] = clocks.summary(facts.get("max_sm_clock_mhz"))
    return results


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        raise SystemExit("usage: python -m traceattr.runner PLAN.json RUN_FOLDER")
    plan = RunPlan.read(Path(args[0]))
    folder = Path(args[1])
    results = run(plan, folder)
    (folder / plan.results).write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    say(f"wrote {folder / plan.results}")
