"""flashinfer's ``BatchMLAPagedAttentionWrapper`` (fa2, fa3): one persistent kernel per call.

Both variants plan on the host (flashinfer's scheduler; no GPU kernel) and
launch one cooperative kernel whose split-KV partial results are merged
inside it, after a grid sync: the "in-kernel merge" side of the reduce-kernel
lever. The *per-token* variant runs the q verify tokens as q requests of one
token each (no folding of verify tokens into one request): the Hopper
stand-in for trtllm-gen's fold-less path, whose time grows with q.

Current API only (no deprecation warnings): ``plan(metadata=MLAPlanMetadata.csr(...), …)``
by keyword and ``run(query=…, kv_cache=…)`` with packed rank-3 tensors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traceattr.backends.base import SM_SCALE, CallPlan, Capabilities, TensorSpec
from traceattr.backends.layout import KvLayout, Requests
from traceattr.shapes import HEAD_DIM, LATENT_DIM, ROPE_DIM, Shape

WORKSPACE_BYTES = 128 << 20  # flashinfer's documented float workspace size
_KV_DTYPE = {"bf16": "bfloat16", "fp8": "float8_e4m3fn"}


@dataclass(frozen=True)
class FlashinferMLA:
    """One wrapper variant: ``wrapper_backend`` fa2/fa3, optionally one request per verify token."""

    caps: Capabilities
    wrapper_backend: str
    per_token: bool = False

    def requests(self, layout: KvLayout) -> Requests:
        return layout.row_requests() if self.per_token else layout.requests()

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
        notes = ()
        if self.per_token:
            notes = (f"{shape.q} verify tokens × {shape.batch} requests run as {b} one-token requests",)
        return CallPlan(self.caps.name, shape, tensors, scalars, notes)

    def prepare(self, shape: Shape, inputs: Any) -> _WrapperCall:
        import flashinfer
        import torch

        from traceattr.backends.inputs import metadata

        plan = self.plan(shape)
        meta = metadata(inputs, self.requests(inputs.layout))
        workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=inputs.device)
        wrapper = flashinfer.mla.BatchMLAPagedAttentionWrapper(workspace, backend=self.wrapper_backend)
        kv_dtype = inputs.kv.dtype
        wrapper.plan(
            metadata=flashinfer.mla.MLAPlanMetadata.csr(
                meta["qo_indptr"], meta["kv_indptr"], meta["kv_indices"], meta["kv_lens"]
            ),
            num_heads=shape.heads,
            head_dim_ckv=LATENT_DIM,
            head_dim_kpe=ROPE_DIM,
            page_size=shape.page,
            causal=plan.scalars["causal"],
            sm_scale=SM_SCALE,
            q_data_type=torch.bfloat16,
            kv_data_type=kv_dtype,
        )
        scales = {"ckv_scale": inputs.kv_scale, "kpe_scale": inputs.kv_scale} if shape.kv_dtype == "fp8" else {}
        return _WrapperCall(plan, wrapper, inputs.q, inputs.kv, scales, (workspace, meta))


@dataclass
class _WrapperCall:
    plan: CallPlan
    wrapper: Any
    query: Any
    kv_cache: Any
    scales: dict[str, float]
    keep_alive: tuple[Any, ...]  # workspace and metadata must outlive the plan

    def run(self) -> Any:
        return self.wrapper.run(query=self.query, kv_cache=self.kv_cache, **self.scales)

    def output_rows(self, out: Any) -> Any:
        return out  # already [total_q, H, 512] in request order (per-token rows too)
