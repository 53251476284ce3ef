"""One DCP rank of a real multi-GPU run (``traceattr profile --ranks N``); nsys runs one per GPU.

Decode context parallelism as it is served: rank r holds shard r of the
context (:meth:`traceattr.core.shapes.Shape.dcp_shards` tokens) and attends over it with
all heads, returning (output, LSE); the N partials are all-gathered over NCCL
(torch.distributed) and merged with ``flashinfer.merge_states``. Unlike the
one-GPU emulation (:mod:`traceattr.backends.dcp`), every partial is real and
so is the communication. On ``cute-dsl`` each rank's call is flashinfer's own
DCP path (``flashinfer dcp``: cyclic shards, rank r holding positions r mod N,
``enable_dcp``/``cp_world``/``cp_rank``/``causal_seqlens_kv_global``, as on one
GPU); on other backends the shards are contiguous, each rank's causal mask its
own shard's (``contiguous shards``). ``rank<r>.json`` says which (``dcp_path``).

Per iteration: the L2 flush in ``traceattr:flush``, a barrier (the ranks start
each call together; outside every timed range), then one ``traceattr`` range
``backend=… shape=… arm=A iter=i`` around the rank's whole step, holding three
ranges: ``dcp attention``, ``dcp all-gather`` and ``dcp merge``
(:mod:`traceattr.core.callnames`). Before timing, each rank checks the merged
output against a torch merge of the gathered partials, and against the torch
reference: on ``flashinfer dcp`` the merged output and LSE over the whole context
(every rank builds every shard from the same seeds), on ``contiguous shards``
its own partial (output and base-2 LSE) over its shard. Writes ``rank<r>.json`` beside its
report. Environment: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
(set by :mod:`traceattr.jobs.rank_runs`).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

import nvtx
import torch
import torch.distributed as dist

from traceattr.backends.arms import arm_backend, parse_arm
from traceattr.backends.base import SM_SCALE
from traceattr.backends.dcp import (
    CONTIGUOUS_SHARDS,
    EMULATED,
    FLASHINFER_DCP,
    DcpRank,
    dcp_path,
    dcp_rank_inputs,
    dcp_whole,
    merged_lse,
)
from traceattr.backends.inputs import build_inputs
from traceattr.backends.reference import LSE_LIMIT, lse_error, merge_reference, mla_reference_lse, relative_error
from traceattr.core.callnames import DCP_ATTENTION, DCP_GATHER, DCP_MERGE, DOMAIN, FLUSH, CallName
from traceattr.core.progress import Progress, emit
from traceattr.core.shapes import parse_shape
from traceattr.runner.environment import gpu_facts, versions


def say(rank: int, message: str) -> None:
    emit(Progress(f"rank {rank}: {message}"))


class RankStep:
    """This rank's attention, the all-gather of (output, LSE) and the merge: one DCP decode step."""

    def __init__(self, call: Any, world: int, rows: torch.Tensor, lse: torch.Tensor) -> None:
        import flashinfer

        self.call = call
        self.merge = flashinfer.merge_states
        self.gathered = torch.empty(world, *rows.shape, dtype=rows.dtype, device=rows.device)
        self.gathered_lse = torch.empty(world, *lse.shape, dtype=torch.float32, device=rows.device)

    def run(self, annotate: bool = False) -> torch.Tensor:
        with _range(DCP_ATTENTION, annotate):
            out, lse = self.call.run()
            rows = self.call.output_rows(out)
        with _range(DCP_GATHER, annotate):
            dist.all_gather_into_tensor(self.gathered, rows.contiguous())
            dist.all_gather_into_tensor(self.gathered_lse, lse.float().contiguous())
        with _range(DCP_MERGE, annotate):
            n, r, h, d = self.gathered.shape
            # as traceattr.backends.dcp: one sequence of N states, every (row, head) a head of it
            merged, _ = self.merge(self.gathered.view(1, n, r * h, d), self.gathered_lse.view(1, n, r * h))
        return merged.view(r, h, d)


class _range:
    def __init__(self, message: str, on: bool) -> None:
        self.cm = nvtx.annotate(message, domain=DOMAIN) if on else None

    def __enter__(self) -> None:
        if self.cm is not None:
            self.cm.__enter__()

    def __exit__(self, *exc: object) -> None:
        if self.cm is not None:
            self.cm.__exit__(*exc)


def run(plan: dict[str, Any], folder: Path) -> dict[str, Any]:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    shape = parse_shape(plan["shape"])
    arm = parse_arm(plan["arm"])
    shard = shape.dcp_shards()[rank]
    mine = replace(shape, ctx=shard, dcp=1)
    backend = arm_backend(arm)
    path = CONTIGUOUS_SHARDS if dcp_path(backend) == EMULATED else FLASHINFER_DCP
    result: dict[str, Any] = {"rank": rank, "world": world, "shard_tokens": shard, "dcp_path": path,
                              "gpu": gpu_facts(), "versions": versions(), "plan": plan}  # fmt: skip
    say(rank, f"{shape.name}: building my shard ({shard:,} tokens × {shape.batch}, {path})")
    whole = None
    if path == FLASHINFER_DCP:
        # every rank builds every shard alike (same seeds): its own for its call, all of them for the reference
        last = build_inputs(shape.rank_share(), shuffle=False, seed=plan["seed"])
        shards = dcp_rank_inputs(last, shape, plan["seed"])
        inputs = shards[rank]
        call = backend.prepare(inputs.shape, inputs, dcp=DcpRank(shape, rank))
        whole = dcp_whole(shards, shape) if plan["validate"] else None
    else:
        inputs = build_inputs(mine, shuffle=False, seed=plan["seed"] + rank)  # each rank its own tokens
        call = backend.prepare(arm.call_shape(mine), inputs, lse=True)
    out, lse = call.run()
    rows = call.output_rows(out)
    step = RankStep(call, world, rows, lse)
    tolerance = plan["tolerance"][mine.kv_dtype]
    if plan["validate"]:
        merged = step.run()
        torch.cuda.synchronize()
        merge_err = relative_error(merged, merge_reference(step.gathered, step.gathered_lse))
        if whole is not None:  # flashinfer dcp: the merged output over the whole context
            ref, ref_lse = mla_reference_lse(whole, whole.layout.requests(), SM_SCALE)
            err, lse_err = relative_error(merged, ref), lse_error(merged_lse(step.gathered_lse), ref_lse)
        else:  # contiguous shards: this rank's partial over its shard
            ref, ref_lse = mla_reference_lse(inputs, inputs.layout.requests(), SM_SCALE)
            err, lse_err = relative_error(rows, ref), lse_error(lse, ref_lse)
        result.update(relative_error=err, merge_relative_error=merge_err, lse_abs_error=lse_err)
        if not (err <= tolerance and merge_err <= tolerance and lse_err <= LSE_LIMIT[mine.kv_dtype]):
            raise SystemExit(f"rank {rank}: refused: attention error {err:.3g}, merge error {merge_err:.3g}, "
                             f"LSE off by {lse_err:.3g} (base 2)")  # fmt: skip
        say(rank, f"ok (attention error {err:.2g}, merge error {merge_err:.2g}, LSE {lse_err:.2g})")
    for _ in range(plan["warmup"]):
        step.run()
    flush = torch.empty(plan["flush_bytes"], dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    dist.barrier()
    events = []
    torch.cuda.profiler.start()
    for i in range(plan["iters"]):
        with nvtx.annotate(FLUSH, domain=DOMAIN):
            flush.zero_()
        dist.barrier()  # the ranks start each step together, as a served step does
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with nvtx.annotate(CallName(arm.label, shape.name, "A", i).message, domain=DOMAIN):
            start.record()
            step.run(annotate=True)
            stop.record()
        events.append((start, stop))
        torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    result["events"] = [
        {"backend": arm.label, "shape": shape.name, "iter": i, "event_us": round(a.elapsed_time(b) * 1000.0, 3)}
        for i, (a, b) in enumerate(events)
    ]
    dist.barrier()
    dist.destroy_process_group()
    return result


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        raise SystemExit("usage: python -m traceattr.runner.ranks PLAN.json RUN_FOLDER")
    plan = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    folder = Path(args[1])
    rank = int(os.environ["RANK"])
    started = time.time()
    try:
        result = run(plan, folder)
    except Exception:
        (folder / f"rank{rank}.json").write_text(json.dumps({"rank": rank, "error": traceback.format_exc()}, indent=2))
        raise
    result["seconds"] = round(time.time() - started, 1)
    (folder / f"rank{rank}.json").write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    say(rank, "done")


if __name__ == "__main__":
    main()
