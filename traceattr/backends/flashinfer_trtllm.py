"""Blackwell MLA decode through ``flashinfer.mla.trtllm_batch_decode_with_kv_cache_mla``.

Three backends of the one functional API, for sm_100/sm_103 (B200/B300):

* ``trtllm-gen`` — the ``fmhaSm100f…`` cubin kernels. Without folding, each
  query row re-reads the KV (time ~ ctx × q); ``KeepsAbForGen`` kernels
  (H ≥ 64) add a separate ``fmhaReductionKernel``, ``SwapsAbForGen`` (H ≤ 32)
  reduce in-kernel.
* ``cute-dsl`` — the CuTe DSL ``mla_decode`` kernel that folds the q verify
  rows into one tile (flat in q), plus ``kernel_cutlass_reduction_kernel``
  when it splits the KV (split_kv > 1).
* ``cake`` — generated Blackwell kernels (``kernel_cake_trtllm_mla_blackwell_*``
  for bf16 with H ∈ {64, 128}; the Kimi-K3 fp8 paged route otherwise).

The trtllm-gen multi-CTA counter buffer is allocated once here: without it
the API zero-fills a fresh one on every call, an extra kernel in the trace.

DCP rows: only ``cute-dsl`` has flashinfer's own DCP path (``enable_dcp``,
``cp_world``, ``cp_rank``, ``causal_seqlens_kv_global``; flashinfer 0.7.2 refuses
``enable_dcp=True`` on every other backend); :meth:`TrtllmDecode.dcp_plan` adds
those to one rank's call (:class:`traceattr.backends.dcp.DcpRank`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from traceattr.backends.base import SM_SCALE, CallPlan, Capabilities, TensorSpec
from traceattr.backends.dcp import DcpRank
from traceattr.backends.layout import KvLayout, Requests
from traceattr.core.errors import BackendUnsupported
from traceattr.core.shapes import HEAD_DIM, LATENT_DIM, ROPE_DIM, Shape

BLACKWELL = frozenset({(10, 0), (10, 3), (10, 7)})
WORKSPACE_BYTES = 128 << 20
QK_NOPE_HEAD_DIM = 128  # DeepSeek/Kimi: selects the cake route; ignored by the others
_DTYPE = {"bf16": "bfloat16", "fp8": "float8_e4m3fn"}

TRTLLM_GEN = Capabilities(
    name="trtllm-gen",
    family="trtllm-gen",
    archs=BLACKWELL,
    kv_dtypes=frozenset({"bf16", "fp8"}),
    page_sizes=frozenset({32, 64}),
    heads=(1, 1024),
    heads_excluded=(64, 128),
    patterns=frozenset({"uniform", "ragged"}),
    packages=("flashinfer",),
    structure="fmhaSm100f kernel per row tile; + fmhaReductionKernel when KeepsAbForGen splits KV",
    # the seeds' tables; flashinfer 0.7.2 agrees: enable_dcp=True "is only supported by backend='cute-dsl'"
    dcp_refusal="DCP: cute-dsl only — trtllm's decode kernel doesn't implement DCP",
)
CUTE_DSL = Capabilities(
    name="cute-dsl",
    family="cute-dsl",
    archs=BLACKWELL,
    kv_dtypes=frozenset({"bf16", "fp8"}),
    page_sizes=frozenset({2, 4, 8, 16, 32, 64, 128}),
    heads=(1, 128),
    patterns=frozenset({"uniform", "ragged"}),
    packages=("flashinfer",),
    structure="mla_decode fold_sq split-KV kernel + reduction kernel when split_kv > 1",
    lse=True,  # return_lse with return_lse_base="base2" (its own default is natural-log)
)
CAKE = Capabilities(
    name="cake",
    family="cake",
    archs=frozenset({(10, 0), (10, 3)}),
    kv_dtypes=frozenset({"bf16", "fp8"}),
    page_sizes=frozenset({32, 64}),
    heads=(1, 128),
    heads_by_dtype={"bf16": frozenset({64, 128})},  # the dense generated kernels exist for these H
    patterns=frozenset({"uniform"}),
    packages=("flashinfer",),
    structure="generated main kernel + reducer kernel (or one kernel)",
    # the TRT-LLM-style route (H in {64, 128}) returns an LSE; flashinfer refuses LSE on the Kimi-K3 fp8
    # route ("backend='cake' does not support return_lse / lse"), and that refusal is the arm's reason
    lse=True,
)


@dataclass(frozen=True)
class TrtllmDecode:
    """One ``backend=`` of the functional API."""

    caps: Capabilities

    @property
    def api_backend(self) -> str:
        return self.caps.name

    @property
    def native_dcp(self) -> bool:
        """Whether flashinfer runs a DCP rank itself: "enable_dcp=True is only supported by backend='cute-dsl'"."""
        return self.api_backend == "cute-dsl"

    @staticmethod
    def requests(layout: KvLayout) -> Requests:
        return layout.requests()

    def block_table_width(self, req: Requests, page: int) -> int:
        """Pages per row; all but trtllm-gen need a multiple of 128 // page."""
        if self.api_backend == "trtllm-gen":
            return req.max_pages
        align = max(1, 128 // page)
        return -(-req.max_pages // align) * align

    def plan(self, shape: Shape) -> CallPlan:
        req = self.requests(KvLayout(shape))
        fp8 = shape.kv_dtype == "fp8"
        dtype = _DTYPE[shape.kv_dtype]  # q must match the cache's dtype on these kernels
        uniform = req.uniform_q
        q_shape = (req.batch, uniform, shape.heads, HEAD_DIM) if uniform else (req.total_q, shape.heads, HEAD_DIM)
        tensors = {
            "query": TensorSpec(q_shape, dtype),
            "kv_cache": TensorSpec((KvLayout(shape).num_pages, shape.page, HEAD_DIM), dtype),
            "workspace_buffer": TensorSpec((WORKSPACE_BYTES,), "uint8"),
            "block_tables": TensorSpec((req.batch, self.block_table_width(req, shape.page)), "int32"),
            "seq_lens": TensorSpec((req.batch,), "int32"),
            "out": TensorSpec((*q_shape[:-1], LATENT_DIM), "bfloat16"),
        }
        if uniform is None:
            tensors["cum_seq_lens_q"] = TensorSpec((req.batch + 1,), "int32")
        scalars: dict[str, Any] = {
            "backend": self.api_backend,
            "qk_nope_head_dim": QK_NOPE_HEAD_DIM,
            "kv_lora_rank": LATENT_DIM,
            "qk_rope_head_dim": ROPE_DIM,
            "max_seq_len": max(req.kv_lens),
            # bmm1 = q_scale · k_scale · softmax scale; bmm2 = v_scale (fp8 dequantisation folds in here)
            "bmm1_scale": SM_SCALE,
            "bmm2_scale": 1.0,
        }
        if uniform is None:
            scalars["max_q_len"] = max(req.q_lens)
        notes = ("fp8: queries are quantised to e4m3 like the cache; scales fold into bmm1/bmm2",) if fp8 else ()
        return CallPlan(self.caps.name, shape, tensors, scalars, notes)

    def dcp_plan(self, shape: Shape, rank: DcpRank) -> CallPlan:
        """*rank*'s call on its shard *shape* (rank-local ``seq_lens``/``max_seq_len``, as flashinfer wants them)
        with flashinfer's DCP arguments: the rank, the world and each request's global causal bound."""
        if not self.native_dcp:
            raise BackendUnsupported(f"{self.caps.name}: flashinfer's DCP path is cute-dsl's only")
        if (shape.ctx, shape.dcp) != (rank.local_tokens, 1):
            raise ValueError(f"dcp_plan: {shape.name} is not rank {rank.rank}'s shard of {rank.row.name}")
        base = self.plan(shape)
        tensors = {**base.tensors, "causal_seqlens_kv_global": TensorSpec((shape.batch,), "int32")}
        scalars = {**base.scalars, "enable_dcp": True, "cp_world": rank.world, "cp_rank": rank.rank}
        note = f"DCP: flashinfer's cyclic ranks; rank {rank.rank} of {rank.world} holds positions {rank.rank} mod {rank.world}"
        return replace(base, tensors=tensors, scalars=scalars, notes=(*base.notes, note))

    def prepare(self, shape: Shape, inputs: Any, *, lse: bool = False, dcp: DcpRank | None = None) -> _TrtllmCall:
        import flashinfer
        import torch

        plan = self.plan(shape) if dcp is None else self.dcp_plan(shape, dcp)
        req = self.requests(inputs.layout)
        uniform = req.uniform_q
        query = inputs.q if shape.kv_dtype == "bf16" else inputs.q.to(inputs.kv.dtype)
        if uniform is not None:
            query = query.view(req.batch, uniform, shape.heads, HEAD_DIM)
        counter = None
        if self.api_backend == "trtllm-gen":
            sms = torch.cuda.get_device_properties(inputs.device).multi_processor_count
            count = -(-max(req.batch * shape.heads, sms) // 8) * 8
            counter = torch.zeros(count * 4, dtype=torch.uint8, device=inputs.device)
        tensors = {
            "query": query,
            "kv_cache": inputs.kv,
            # zero-initialised: kernels keep semaphore state in it
            "workspace_buffer": torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=inputs.device),
            "block_tables": inputs.ints(req.block_table(self.block_table_width(req, shape.page))),
            "seq_lens": inputs.ints(list(req.kv_lens)),
            "out": torch.empty(*query.shape[:-1], LATENT_DIM, dtype=torch.bfloat16, device=inputs.device),
        }
        if uniform is None:
            tensors["cum_seq_lens_q"] = inputs.ints(req.qo_indptr)
        if dcp is not None:
            tensors["causal_seqlens_kv_global"] = inputs.ints(list(dcp.global_lens()))
            lse = True  # a rank's state is (output, LSE); flashinfer refuses enable_dcp without return_lse
        kwargs = self.call_kwargs(plan, tensors, kv_scale=inputs.kv_scale, counter=counter, lse=lse)
        return _TrtllmCall(plan, flashinfer.mla.trtllm_batch_decode_with_kv_cache_mla, kwargs, lse)

    def call_kwargs(self, plan: CallPlan, tensors: Mapping[str, Any], *, kv_scale: float = 1.0, counter: Any = None,
                    lse: bool = False) -> dict[str, Any]:  # fmt: skip
        """``trtllm_batch_decode_with_kv_cache_mla(**these)``: *plan*'s tensors (one per name) and scalars.

        ``prepare`` and the API contract test (tests/test_contract.py) both build the call here, so every
        keyword is checked against the installed flashinfer's signature. *counter*: trtllm-gen's
        multi-CTA counter buffer; *lse*: return the base-2 LSE too (a DCP rank's partial).
        """
        if set(tensors) != set(plan.tensors):
            raise ValueError(f"{self.caps.name}: tensors {sorted(tensors)} are not the plan's {sorted(plan.tensors)}")
        kwargs: dict[str, Any] = {**tensors, **plan.scalars}
        if plan.shape.kv_dtype == "fp8":
            kwargs["bmm1_scale"] = SM_SCALE * kv_scale
            kwargs["bmm2_scale"] = kv_scale
        if self.api_backend == "trtllm-gen":
            kwargs["multi_ctas_kv_counter_buffer"] = counter
        if lse:
            kwargs.update(return_lse=True, return_lse_base="base2")
        return kwargs


@dataclass
class _TrtllmCall:
    plan: CallPlan
    fn: Any
    kwargs: dict[str, Any]
    lse: bool = False  # run() returns (output, LSE)

    def run(self) -> Any:
        result = self.fn(**self.kwargs)
        if not self.lse:
            return result
        out, lse = result
        return out, lse.reshape(-1, lse.shape[-1])  # [rows, H], base 2 (cute-dsl's own shape may be [B, q, H])

    def output_rows(self, out: Any) -> Any:
        return out.reshape(-1, out.shape[-2], out.shape[-1])
