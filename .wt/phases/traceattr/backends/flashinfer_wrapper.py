"""flashinfer's ``BatchMLAPagedAttentionWrapper`` (fa2, fa3): one persistent kernel per call.

Both variants plan on the host (flashinfer's scheduler; no GPU kernel) and
launch one cooperative kernel whose split-KV partial results are merged
inside it, after a grid sync: the "in-kernel merge" side of the reduce-kernel
lever. The *per-token* variant runs the q verify tokens as q requests of one
token each (no folding of verify tokens into one request): the Hopper
stand-in for trtllm-gen's fold-less path, whose time grows with q.

With ``splits=N`` (the arm ``fa3[splits=N]``) the same KV is cut into N
page-aligned chunks per request, each chunk run as its own request with its
LSE (base 2), and flashinfer's separate ``merge_states`` kernel merges the N
partial results: the "separate merge kernel" side of the lever, on the same
attention kernel. Causal verify rows (q > 1) see all of every chunk but the
last, so the first N-1 chunks are one non-causal launch and the last chunk a
causal one; with q = 1 all N chunks are one launch. Partials are written
straight into a ``[N, rows, H, 512]`` buffer read by the merge as
``[1, N, rows·H, 512]`` (one sequence position, rows·H "heads"), so no copy
runs between attention and merge.

Current API only (no deprecation warnings): ``plan(metadata=MLAPlanMetadata.csr(...), …)``
by keyword and ``run(query=…, kv_cache=…)`` with packed rank-3 tensors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from traceattr.backends.base import SM_SCALE, CallPlan, Capabilities, TensorSpec
from traceattr.backends.layout import KvLayout, Requests
from traceattr.core.shapes import HEAD_DIM, LATENT_DIM, ROPE_DIM, Shape

WORKSPACE_BYTES = 128 << 20  # flashinfer's documented float workspace size
_KV_DTYPE = {"bf16": "bfloat16", "fp8": "float8_e4m3fn"}


@dataclass(frozen=True)
class FlashinferMLA:
    """One wrapper variant: ``wrapper_backend`` fa2/fa3, optionally one request per verify token."""

    caps: Capabilities
    wrapper_backend: str
    per_token: bool = False
    splits: int = 1  # > 1: KV chunks as separate requests + flashinfer merge_states

    def requests(self, layout: KvLayout) -> Requests:
        return layout.row_requests() if self.per_token else layout.requests()

    def launches(self, req: Requests) -> list[tuple[Requests, bool]]:
        """(requests, causal) of each attention launch; with splits, chunk-major (chunk j of every request)."""
        causal = max(req.q_lens) > 1
        if self.splits == 1:
            return [(req, causal)]
        chunks = req.chunks(self.splits)
        if not causal:
            return [(Requests.concat(chunks), False)]
        return [(Requests.concat(chunks[:-1]), False), (chunks[-1], True)]

    def plan(self, shape: Shape) -> CallPlan:
        req = self.requests(KvLayout(shape))
        b = req.batch
        tensors = {
            "query": TensorSpec((req.total_q, shape.heads, HEAD_DIM), "bfloat16"),
            "kv_cache": TensorSpec((KvLayout(shape).num_pages, shape.page, HEAD_DIM), _KV_DTYPE[shape.kv_dtype]),
            "qo_indptr": TensorSpec((b + 1,), "int32"),
            "kv_indptr": TensorSpec((b + 1,), "int32"),
            "kv_indices": TensorSpec((len(req.kv_indices),), "int32"),
            "kv_len_arr": TensorSpec((b,), "int32"),
            "workspace": TensorSpec((WORKSPACE_BYTES,), "uint8"),
        }
        scalars: dict[str, Any] = {
            "backend": self.wrapper_backend,
            "num_heads": shape.heads,
            "head_dim_ckv": LATENT_DIM,
            "head_dim_kpe": ROPE_DIM,
            "page_size": shape.page,
            # verify tokens see the cache up to their own position (bottom-right aligned)
            "causal": max(req.q_lens) > 1,
            "sm_scale": SM_SCALE,
            "q_data_type": "bfloat16",
            "kv_data_type": _KV_DTYPE[shape.kv_dtype],
        }
        notes: tuple[str, ...] = ()
        if self.per_token:
            notes = (f"{shape.q} verify tokens × {shape.batch} requests run as {b} one-token requests",)
        if self.splits > 1:
            launches = self.launches(req)
            scalars["splits"] = self.splits
            tensors["partials"] = TensorSpec((self.splits, req.total_q, shape.heads, LATENT_DIM), "bfloat16")
            tensors["partial_lse"] = TensorSpec((self.splits, req.total_q, shape.heads), "float32")
            notes += (
                f"KV split into {self.splits} chunks per request: {len(launches)} attention launch(es) "
                f"({', '.join('causal' if c else 'non-causal' for _, c in launches)}) + merge_states",
            )
        return CallPlan(self.caps.name, shape, tensors, scalars, notes)

    def prepare(self, shape: Shape, inputs: Any, *, lse: bool = False) -> _WrapperCall | _SplitCall:
        import flashinfer
        import torch

        plan = self.plan(shape)
        req = self.requests(inputs.layout)
        scales = scale_kwargs(shape.kv_dtype, inputs.kv_scale)
        if self.splits == 1:
            wrapper, keep = self._planned(flashinfer, torch, shape, inputs, req, plan.scalars["causal"], lse)
            return _WrapperCall(plan, wrapper, inputs.q, inputs.kv, scales, keep, lse)
        n, rows = self.splits, req.total_q
        partials = torch.empty(n, rows, shape.heads, LATENT_DIM, dtype=torch.bfloat16, device=inputs.device)
        partial_lse = torch.empty(n, rows, shape.heads, dtype=torch.float32, device=inputs.device)
        runs, keep_all, first = [], [], 0
        for part, causal in self.launches(req):
            count = part.total_q // rows  # chunks in this launch
            wrapper, keep = self._planned(flashinfer, torch, shape, inputs, part, causal, True)
            query = inputs.q if count == 1 else inputs.q.repeat(count, 1, 1)  # every chunk sees every row
            out = partials[first : first + count].view(count * rows, shape.heads, LATENT_DIM)
            out_lse = partial_lse[first : first + count].view(count * rows, shape.heads)
            runs.append((wrapper, query, out, out_lse))
            keep_all.append((keep, query))
            first += count
        return _SplitCall(plan, runs, inputs.kv, scales, partials, partial_lse, flashinfer.merge_states, keep_all, lse)

    def _planned(self, flashinfer: Any, torch: Any, shape: Shape, inputs: Any, req: Requests, causal: bool,
                 lse: bool) -> tuple[Any, tuple[Any, ...]]:  # fmt: skip
        """A wrapper planned for *req* (LSE in base 2 when asked), and what must outlive it."""
        from traceattr.backends.inputs import metadata

        meta = metadata(inputs, req)
        workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=inputs.device)
        wrapper = flashinfer.mla.BatchMLAPagedAttentionWrapper(workspace, **wrapper_kwargs(self.wrapper_backend))
        csr = csr_args(meta["qo_indptr"], meta["kv_indptr"], meta["kv_indices"], meta["kv_lens"])
        wrapper.plan(
            **plan_kwargs(
                flashinfer.mla.MLAPlanMetadata.csr(*csr), heads=shape.heads, page=shape.page, causal=causal,
                q_dtype=torch.bfloat16, kv_dtype=inputs.kv.dtype, lse=lse,
            )
        )  # fmt: skip
        return wrapper, (workspace, meta)


# The keyword sets of every flashinfer wrapper call, built in one place: the eager backend, the CUDA-graph
# runtime (traceattr.runtime.graphs) and the API contract test (tests/test_contract.py) all use these,
# so a keyword that the installed flashinfer does not take fails the contract test, not a B200 user's run.


def wrapper_kwargs(backend: str, graph_buffers: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``BatchMLAPagedAttentionWrapper(workspace, **these)``; *graph_buffers*: the CUDA-graph CSR buffers."""
    if graph_buffers is None:
        return {"backend": backend}
    return {"use_cuda_graph": True, "backend": backend, **graph_buffers}


def scale_kwargs(kv_dtype: str, kv_scale: float) -> dict[str, float]:
    """The fp8 cache's dequantisation scales ``wrapper.run`` takes (none for bf16)."""
    return {"ckv_scale": kv_scale, "kpe_scale": kv_scale} if kv_dtype == "fp8" else {}


def csr_args(qo_indptr: Any, kv_indptr: Any, kv_indices: Any, kv_lens: Any) -> tuple[Any, ...]:
    """``MLAPlanMetadata.csr(*these)``: positional, in flashinfer's order."""
    return (qo_indptr, kv_indptr, kv_indices, kv_lens)


def plan_kwargs(metadata: Any, *, heads: int, page: int, causal: bool, q_dtype: Any, kv_dtype: Any,
                lse: bool) -> dict[str, Any]:  # fmt: skip
    """``wrapper.plan(**these)``: keyword-only in flashinfer 0.7 (positional forms are deprecated)."""
    return {
        "metadata": metadata,
        "num_heads": heads,
        "head_dim_ckv": LATENT_DIM,
        "head_dim_kpe": ROPE_DIM,
        "page_size": page,
        "causal": causal,
        "sm_scale": SM_SCALE,
        "q_data_type": q_dtype,
        "kv_data_type": kv_dtype,
        "lse_mode": "base2" if lse else "none",
    }


def run_kwargs(query: Any, kv_cache: Any, scales: Mapping[str, float], *, lse: bool = False, out: Any = None,
               out_lse: Any = None) -> dict[str, Any]:  # fmt: skip
    """``wrapper.run(**these)``; *out*/*out_lse*: caller-owned outputs (split partials), which imply LSE."""
    kwargs: dict[str, Any] = {"query": query, "kv_cache": kv_cache, **scales}
    if out is not None:
        kwargs.update(out=out, lse=out_lse)
    if lse or out is not None:
        kwargs["return_lse"] = True
    return kwargs


def merge_args(v: Any, s: Any) -> tuple[Any, ...]:
    """``flashinfer.merge_states(*these)``: values ``[seq, states, heads, dim]``, LSEs ``[seq, states, heads]``."""
    return (v, s)


@dataclass
class _WrapperCall:
    plan: CallPlan
    wrapper: Any
    query: Any
    kv_cache: Any
    scales: dict[str, float]
    keep_alive: tuple[Any, ...]  # workspace and metadata must outlive the plan
    lse: bool = False

    def run(self) -> Any:
        return self.wrapper.run(**run_kwargs(self.query, self.kv_cache, self.scales, lse=self.lse))

    def output_rows(self, out: Any) -> Any:
        return out  # already [total_q, H, 512] in request order (per-token rows too)


@dataclass
class _SplitCall:
    """Attention over the KV chunks into one partials buffer, then one merge_states over it."""

    plan: CallPlan
    runs: list[tuple[Any, Any, Any, Any]]  # (wrapper, query, out view, lse view) per launch
    kv_cache: Any
    scales: dict[str, float]
    partials: Any  # [N, rows, H, 512]
    partial_lse: Any  # [N, rows, H]
    merge: Any
    keep_alive: list[Any]
    lse: bool = False

    def run(self) -> Any:
        for wrapper, query, out, out_lse in self.runs:
            wrapper.run(**run_kwargs(query, self.kv_cache, self.scales, out=out, out_lse=out_lse))
        n, rows, heads, dim = self.partials.shape
        merged, merged_lse = self.merge(*merge_args(self.partials.view(1, n, rows * heads, dim),
                                                    self.partial_lse.view(1, n, -1)))  # fmt: skip
        out = merged.view(rows, heads, dim)
        return (out, merged_lse.view(rows, heads)) if self.lse else out

    def output_rows(self, out: Any) -> Any:
        return out
