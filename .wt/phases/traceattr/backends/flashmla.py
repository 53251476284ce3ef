"""FlashMLA (the ``sgl-flash-mla`` wheel's legacy sm_90 dense decode): split kernel + combine kernel.

Each call launches ``flash_fwd_splitkv_mla_kernel`` over KV splits and then
``flash_fwd_mla_combine_kernel`` to merge the partial results: the
"separate reduce kernel" side of the lever, measured on Hopper. The
scheduler metadata (``get_mla_metadata_kernel``) is computed by the first
call and reused, as a decode step reuses it across layers; warm-up makes
that first call, so timed calls are split + combine only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from traceattr.backends.base import SM_SCALE, CallPlan, Capabilities, TensorSpec
from traceattr.backends.layout import KvLayout, Requests
from traceattr.core.shapes import HEAD_DIM, LATENT_DIM, Shape

LOG2_E = 1 / math.log(2)

CAPS = Capabilities(
    name="flashmla",
    family="flashmla",
    archs=frozenset({(9, 0)}),
    kv_dtypes=frozenset({"bf16"}),  # its dense fp8 path needs fp8 queries; traceattr keeps q in bf16
    page_sizes=frozenset({64}),
    heads=(1, 128),
    patterns=frozenset({"uniform", "row"}),
    packages=("flash_mla",),
    lse=True,  # its softmax_lse [B, H, s_q] is natural-log; prepare(lse=True) hands it on in base 2
    structure="split-KV kernel + separate combine kernel (+ scheduler kernel on a fresh schedule)",
)


@dataclass(frozen=True)
class FlashMLA:
    caps: Capabilities = CAPS

    @staticmethod
    def requests(layout: KvLayout) -> Requests:
        return layout.requests()

    def plan(self, shape: Shape) -> CallPlan:
        req = self.requests(KvLayout(shape))
        s_q = req.uniform_q
        if s_q is None:
            raise ValueError("FlashMLA needs the same q for every request")
        tensors = {
            "q": TensorSpec((req.batch, s_q, shape.heads, HEAD_DIM), "bfloat16"),
            "k_cache": TensorSpec((KvLayout(shape).num_pages, shape.page, 1, HEAD_DIM), "bfloat16"),
            "block_table": TensorSpec((req.batch, req.max_pages), "int32"),
            "cache_seqlens": TensorSpec((req.batch,), "int32"),
        }
        scalars = {"head_dim_v": LATENT_DIM, "softmax_scale": SM_SCALE, "causal": s_q > 1, "use_legacy": True}
        return CallPlan(self.caps.name, shape, tensors, scalars)

    def prepare(self, shape: Shape, inputs: Any, *, lse: bool = False) -> _FlashMLACall:
        import flash_mla

        plan = self.plan(shape)
        req = self.requests(inputs.layout)
        s_q = req.uniform_q
        q = inputs.q.view(req.batch, s_q, shape.heads, HEAD_DIM)
        k_cache = inputs.kv.unsqueeze(2)  # [P, 64, 1, 576]: one KV head
        block_table = inputs.ints(req.block_table())
        seqlens = inputs.ints(list(req.kv_lens))
        sched, _ = flash_mla.get_mla_metadata()
        return _FlashMLACall(plan, flash_mla.flash_mla_with_kvcache, q, k_cache, block_table, seqlens, sched, lse)


@dataclass
class _FlashMLACall:
    plan: CallPlan
    fn: Any
    q: Any
    k_cache: Any
    block_table: Any
    seqlens: Any
    sched: Any
    lse: bool = False

    def run(self) -> Any:
        args, kwargs = flashmla_call(self.q, self.k_cache, self.block_table, self.seqlens, self.sched,
                                     causal=self.plan.scalars["causal"])  # fmt: skip
        out, lse = self.fn(*args, **kwargs)
        if not self.lse:
            return out
        # [B, H, s_q] natural log → [B·s_q, H] base 2, rows as output_rows orders them
        return out, lse.transpose(1, 2).reshape(-1, lse.shape[1]) * LOG2_E

    def output_rows(self, out: Any) -> Any:
        return out.reshape(-1, out.shape[-2], out.shape[-1])  # [B, s_q, H, 512] → request order rows


def flashmla_call(q: Any, k_cache: Any, block_table: Any, cache_seqlens: Any, sched: Any, *,
                  causal: bool) -> tuple[tuple[Any, ...], dict[str, Any]]:  # fmt: skip
    """``flash_mla_with_kvcache(*args, **kwargs)`` of the legacy dense decode: the eager backend, the
    CUDA-graph runtime and the API contract test (tests/test_contract.py) all build the call here."""
    kwargs = {
        "head_dim_v": LATENT_DIM,
        "tile_scheduler_metadata": sched,
        "num_splits": None,
        "softmax_scale": SM_SCALE,
        "causal": causal,
        "use_legacy": True,
    }
    return (q, k_cache, block_table, cache_seqlens), kwargs
