"""One CUDA graph per (arm, batch size), over static buffers that each step rewrites before replay.

* ``fa3`` / ``fa3[splits=N]``: flashinfer's ``BatchMLAPagedAttentionWrapper(ws, use_cuda_graph=True,
  qo_indptr=…, kv_indptr=…, kv_indices=…, kv_len_arr=…, backend="fa3")`` with caller-owned buffers:
  ``plan()`` at each step copies the new CSR metadata into them and its schedule into the wrapper's
  int workspace, and the captured kernel reads both at replay. With splits, the N chunk requests of
  each request are one (q = 1) or two (q > 1) planned wrappers, the query rows are copied inside the
  graph into the chunks' query buffer, and ``flashinfer.merge_states`` is captured too.
* ``flashmla``: a fresh ``get_mla_metadata()`` schedule object at capture, so the schedule kernel is
  recorded in the graph and recomputes the split plan on every replay from the static
  ``cache_seqlens`` (the step writes only that). Captured with non-zero lengths: a schedule captured
  over zero lengths would be empty.

Plans are issued from host memory (flashinfer reads CSR metadata on the host, so device-side metadata
would cost a device sync per plan); the metadata copies are stream-ordered after the previous
replay. flashinfer stages its schedule through one page-locked host buffer per wrapper, copied
asynchronously: a plan must not overwrite that buffer while the previous plan's copy is still queued,
so each wrapper records an event after its plan and the next plan waits on it (which costs nothing
once the GPU has started the step that plan served: the host may run one step ahead).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from traceattr.backends.flashinfer_wrapper import (
    WORKSPACE_BYTES,
    csr_args,
    merge_args,
    plan_kwargs,
    run_kwargs,
    wrapper_kwargs,
)
from traceattr.backends.flashmla import flashmla_call
from traceattr.core.shapes import HEAD_DIM, LATENT_DIM
from traceattr.runtime.metadata import Launch, SlotLayout, block_table, fa_launches

TORCH_KV = {"bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}


class GraphArmError(RuntimeError):
    """An arm label the runtime cannot capture."""


@dataclass
class StaticInputs:
    """The tensors every arm reads: one paged cache over the slot layout and the step's query rows.

    ``q`` is the decode loop's query buffer: write the step's queries into it (``q.copy_(...)``)
    before ``step``; every captured graph reads it where it is.
    """

    layout: SlotLayout
    heads: int
    kv: torch.Tensor  # [num_pages, page, 576]
    q: torch.Tensor  # [batch·q, heads, 576], rows in request order

    @classmethod
    def random(cls, layout: SlotLayout, heads: int, *, seed: int = 0, device: str = "cuda") -> StaticInputs:
        gen = torch.Generator(device=device).manual_seed(seed)
        kv = torch.empty(layout.num_pages, layout.page, HEAD_DIM, dtype=torch.bfloat16, device=device)
        kv.normal_(generator=gen)
        q = torch.empty(layout.batch * layout.q, heads, HEAD_DIM, dtype=torch.bfloat16, device=device)
        q.normal_(generator=gen)
        return cls(layout, heads, kv, q)


@dataclass(frozen=True)
class Footprint:
    """Device memory an arm took: buffers and workspaces before capture, the graph's pool, the driver's share."""

    buffers_bytes: int  # torch.cuda.memory_allocated delta while allocating buffers, workspace, first plan
    capture_bytes: int  # memory_allocated delta across capture (outputs and temporaries in the graph's pool)
    reserved_bytes: int  # memory_reserved delta over the whole build
    driver_bytes: int  # drop in cudaMemGetInfo's free memory beyond torch's reserved: the graph object itself

    @property
    def total_bytes(self) -> int:
        return self.reserved_bytes + max(self.driver_bytes, 0)


class _Meter:
    """Memory before/after a build, as :class:`Footprint`."""

    def __init__(self) -> None:
        torch.cuda.synchronize()
        self.alloc0 = torch.cuda.memory_allocated()
        self.res0 = torch.cuda.memory_reserved()
        self.free0 = torch.cuda.mem_get_info()[0]
        self.alloc_mid = self.alloc0

    def mid(self) -> None:
        torch.cuda.synchronize()
        self.alloc_mid = torch.cuda.memory_allocated()

    def done(self) -> Footprint:
        torch.cuda.synchronize()
        alloc, res, free = torch.cuda.memory_allocated(), torch.cuda.memory_reserved(), torch.cuda.mem_get_info()[0]
        return Footprint(self.alloc_mid - self.alloc0, alloc - self.alloc_mid, res - self.res0,
                         (self.free0 - free) - (res - self.res0))  # fmt: skip


def _capture(run: Any) -> tuple[torch.cuda.CUDAGraph, Any]:
    """Warm *run* on a side stream (allocator, JIT, first-call work), then capture it; (graph, its output)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        run()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = run()
    return graph, out


def graph_buffers(requests: int, num_pages: int, device: Any) -> dict[str, torch.Tensor]:
    """The caller-owned CSR buffers a CUDA-graph wrapper plans into (``wrapper_kwargs(backend, these)``)."""
    return {
        "qo_indptr": torch.empty(requests + 1, dtype=torch.int32, device=device),
        "kv_indptr": torch.empty(requests + 1, dtype=torch.int32, device=device),
        "kv_indices": torch.empty(num_pages, dtype=torch.int32, device=device),
        "kv_len_arr": torch.empty(requests, dtype=torch.int32, device=device),
    }


def _cpu_ints(values: Sequence[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int32)


class FlashinferGraphArm:
    """``fa3`` or ``fa3[splits=N]`` captured once for one batch size; ``update`` re-plans, ``replay`` launches."""

    def __init__(self, label: str, inputs: StaticInputs, capture_lens: Sequence[int], *, splits: int = 1,
                 wrapper_backend: str = "fa3") -> None:  # fmt: skip
        import flashinfer

        self.label, self.inputs, self.splits = label, inputs, splits
        self._fi = flashinfer
        meter = _Meter()
        layout, dev = inputs.layout, inputs.kv.device
        # every page id a step can name, on the host: a step's kv_indices are slices of it (no Python list of 14k ints)
        self._page_ids = torch.arange(layout.num_pages, dtype=torch.int32)
        launches = fa_launches(layout, capture_lens, splits)
        self._wrappers: list[Any] = []
        self._plan_info: list[Any] = []
        self._staged: list[torch.cuda.Event | None] = []
        rows = layout.batch * layout.q
        for launch in launches:
            buffers = graph_buffers(launch.requests, layout.num_pages, dev)
            workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=dev)
            wrapper = flashinfer.mla.BatchMLAPagedAttentionWrapper(
                workspace, **wrapper_kwargs(wrapper_backend, buffers)
            )
            self._wrappers.append(wrapper)
            self._staged.append(None)
        self._plan(launches)
        self._plan_info = [_info(w) for w in self._wrappers]
        self.plan_changes = 0
        # splits: every chunk of a request sees all of its query rows; partials straight into one buffer
        self._queries: list[torch.Tensor] = []
        self._outs: list[tuple[torch.Tensor, torch.Tensor]] = []
        if splits > 1:
            h = inputs.heads
            self.partials = torch.empty(splits, rows, h, LATENT_DIM, dtype=torch.bfloat16, device=dev)
            self.partial_lse = torch.empty(splits, rows, h, dtype=torch.float32, device=dev)
            first = 0
            for launch in launches:
                count = launch.requests // layout.batch
                self._queries.append(torch.empty(count * rows, h, HEAD_DIM, dtype=torch.bfloat16, device=dev))
                out = self.partials[first : first + count].view(count * rows, h, LATENT_DIM)
                lse = self.partial_lse[first : first + count].view(count * rows, h)
                self._outs.append((out, lse))
                first += count
        meter.mid()
        self.graph, self.output = _capture(self._run)
        self.footprint = meter.done()

    def _plan(self, launches: Sequence[Launch]) -> None:
        torch_kv = self.inputs.kv.dtype
        lse = self.splits > 1
        for k, (wrapper, launch) in enumerate(zip(self._wrappers, launches, strict=True)):
            staged = self._staged[k]
            if staged is not None:
                staged.synchronize()  # the previous plan's page-locked schedule has been copied out
            indices = torch.cat([self._page_ids[lo:hi] for lo, hi in launch.page_ranges])
            csr = csr_args(_cpu_ints(launch.qo_indptr), _cpu_ints(launch.kv_indptr), indices, _cpu_ints(launch.kv_lens))
            wrapper.plan(
                **plan_kwargs(
                    self._fi.mla.MLAPlanMetadata.csr(*csr), heads=self.inputs.heads, page=self.inputs.layout.page,
                    causal=launch.causal, q_dtype=torch.bfloat16, kv_dtype=torch_kv, lse=lse,
                )
            )  # fmt: skip
            event = torch.cuda.Event()
            event.record()
            self._staged[k] = event

    def _run(self) -> Any:
        q, kv = self.inputs.q, self.inputs.kv
        if self.splits == 1:
            return self._wrappers[0].run(**run_kwargs(q, kv, {}))
        rows = q.shape[0]
        for wrapper, query, (out, lse) in zip(self._wrappers, self._queries, self._outs, strict=True):
            query.view(-1, rows, *q.shape[1:]).copy_(q.unsqueeze(0).expand(query.shape[0] // rows, *q.shape))
            wrapper.run(**run_kwargs(query, kv, {}, out=out, out_lse=lse))
        n, _, heads, dim = self.partials.shape
        merged, _ = self._fi.merge_states(*merge_args(self.partials.view(1, n, rows * heads, dim),
                                                      self.partial_lse.view(1, n, -1)))  # fmt: skip
        return merged.view(rows, heads, dim)

    def update(self, seq_lens: Sequence[int]) -> None:
        self._plan(fa_launches(self.inputs.layout, seq_lens, self.splits))
        # the captured kernel keeps the capture's plan layout (offsets into the workspaces); a re-plan that
        # moved them would replay stale offsets. Counted, not raised: the bitwise checks are the arbiter,
        # and the GPU tests require none.
        if [_info(w) for w in self._wrappers] != self._plan_info:
            self.plan_changes += 1

    def replay(self) -> Any:
        self.graph.replay()
        return self.output


def _info(wrapper: Any) -> Any:
    """The wrapper's plan layout as comparable values (flashinfer keeps it as a sequence of ints)."""
    info = getattr(wrapper, "_plan_info", None)
    try:
        return [int(x) for x in info]  # type: ignore[union-attr]
    except (TypeError, ValueError):
        return repr(info)


class FlashMLAGraphArm:
    """FlashMLA (sgl-flash-mla's legacy dense decode) captured once; ``update`` writes ``cache_seqlens``."""

    def __init__(self, label: str, inputs: StaticInputs, capture_lens: Sequence[int]) -> None:
        import flash_mla

        self.label, self.inputs = label, inputs
        self._fm = flash_mla
        meter = _Meter()
        layout, dev = inputs.layout, inputs.kv.device
        layout.check(capture_lens)
        self.block_table = torch.tensor(block_table(layout), dtype=torch.int32, device=dev)
        self.cache_seqlens = torch.tensor(list(capture_lens), dtype=torch.int32, device=dev)
        self._q = inputs.q.view(layout.batch, layout.q, inputs.heads, HEAD_DIM)
        self._k = inputs.kv.unsqueeze(2)  # [P, 64, 1, 576]: one KV head
        meter.mid()
        self.graph, self.output = _capture(self._run)
        self.footprint = meter.done()

    def _run(self) -> Any:
        sched, _ = self._fm.get_mla_metadata()  # fresh: the schedule kernel runs (and is captured) on every call
        args, kwargs = flashmla_call(self._q, self._k, self.block_table, self.cache_seqlens, sched,
                                     causal=self.inputs.layout.q > 1)  # fmt: skip
        out, _ = self._fm.flash_mla_with_kvcache(*args, **kwargs)
        return out.view(-1, self.inputs.heads, LATENT_DIM)

    def update(self, seq_lens: Sequence[int]) -> None:
        self.inputs.layout.check(seq_lens)
        self.cache_seqlens.copy_(_cpu_ints(seq_lens), non_blocking=True)  # pageable source: staged at once

    def replay(self) -> Any:
        self.graph.replay()
        return self.output


def build_arm(label: str, inputs: StaticInputs, capture_lens: Sequence[int]) -> FlashinferGraphArm | FlashMLAGraphArm:
    """The graph arm for a table's arm label (``fa3``, ``fa3[splits=N]``, ``flashmla``; ``[graphs]`` is implied)."""
    from traceattr.backends.arms import parse_arm

    arm = parse_arm(label)
    extra = {k for k, _ in arm.options} - {"graphs", "splits"}
    if extra or arm.backend not in ("fa3", "flashmla"):
        raise GraphArmError(f"arm {label!r}: the runtime captures fa3, fa3[splits=N] and flashmla only")
    if arm.backend == "flashmla":
        if arm.get("splits"):
            raise GraphArmError(f"arm {label!r}: flashmla has no splits option")
        return FlashMLAGraphArm(label, inputs, capture_lens)
    return FlashinferGraphArm(label, inputs, capture_lens, splits=int(arm.get("splits", 1)))


def time_call(fn: Any) -> int:
    """Host nanoseconds *fn* takes (no device sync)."""
    t0 = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - t0
