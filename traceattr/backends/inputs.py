"""The tensors of one shape, built once on the GPU and shared by every backend.

One paged cache ``[num_pages, page, 576]`` (512 latent + 64 rope dims, bf16 or
fp8 e4m3 with a per-tensor scale), the queries ``[total_q, H, 576]`` bf16 in
request order, and int32 metadata made on demand from a :class:`Requests`.
Backends take views of these (FlashMLA wants ``[P, 64, 1, 576]``; trtllm-gen
``[B, q, H, 576]``): no backend gets data another did not. A DCP row's inputs
are the measured rank's shard; flashinfer's own DCP path (cute-dsl) adds the
other ranks' shards and the whole context they interleave into
(:func:`traceattr.backends.dcp.dcp_rank_inputs`, :func:`traceattr.backends.dcp.dcp_whole`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from traceattr.backends.layout import KvLayout, Requests
from traceattr.core.shapes import HEAD_DIM, Shape

TORCH_DTYPES = {"bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}


@dataclass
class MLAInputs:
    shape: Shape
    layout: KvLayout
    kv: torch.Tensor  # [num_pages, page, 576], bf16 or float8_e4m3fn
    kv_scale: float  # real value = stored value * kv_scale (1.0 for bf16)
    q: torch.Tensor  # [total_q, heads, 576] bf16, rows in request order

    @property
    def device(self) -> torch.device:
        return self.kv.device

    def ints(self, values: list[int] | list[list[int]]) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.int32, device=self.device)

    def kv_bytes(self) -> int:
        return self.kv.numel() * self.kv.element_size()


def build_inputs(
    shape: Shape, *, device: str | torch.device = "cuda", shuffle: bool = False, seed: int = 0
) -> MLAInputs:
    """Random inputs for *shape*; the same seed gives the same tensors."""
    layout = KvLayout(shape, shuffle=shuffle, seed=seed)
    gen = torch.Generator(device=device).manual_seed(seed)
    pages = layout.num_pages
    kv = torch.empty(pages, shape.page, HEAD_DIM, dtype=torch.bfloat16, device=device)
    kv.normal_(generator=gen)
    scale = 1.0
    if shape.kv_dtype == "fp8":
        # keep values well inside e4m3's range; the kernels dequantise with `scale`
        scale = 0.5
        kv = (kv / scale).to(torch.float8_e4m3fn)
    total_q = sum(layout.requests().q_lens) if shape.pattern != "row" else shape.batch * shape.q
    q = torch.empty(total_q, shape.heads, HEAD_DIM, dtype=torch.bfloat16, device=device)
    q.normal_(generator=gen)
    return MLAInputs(shape, layout, kv, scale, q)


def metadata(inputs: MLAInputs, requests: Requests) -> dict[str, torch.Tensor]:
    """CSR and dense int32 metadata of *requests* on the inputs' device."""
    return {
        "qo_indptr": inputs.ints(requests.qo_indptr),
        "kv_indptr": inputs.ints(requests.kv_indptr),
        "kv_indices": inputs.ints(requests.kv_indices),
        "kv_lens": inputs.ints(list(requests.kv_lens)),
    }


def as_shape(inputs: MLAInputs, shape: Shape) -> MLAInputs:
    """The same KV tokens and queries in the cache *shape* asks for (its page size and KV dtype).

    Arms with ``page=`` or ``kv=`` read these: a separate cache holding token t of
    request b exactly where *shape*'s layout puts it (shuffled alike). bf16 → fp8
    quantises as :func:`build_inputs` does, so ``fa3[kv=fp8]`` on a bf16 row reads
    what ``fa3`` on the fp8 row would.
    """
    if (shape.page, shape.kv_dtype) == (inputs.shape.page, inputs.shape.kv_dtype):
        return inputs
    old, new = inputs.layout, KvLayout(shape, shuffle=inputs.layout.shuffle, seed=inputs.layout.seed)
    flat_old = inputs.kv.view(-1, HEAD_DIM)
    kv = torch.zeros(new.num_pages * shape.page, HEAD_DIM, dtype=torch.bfloat16, device=inputs.device)
    tok = torch.arange(shape.ctx, device=inputs.device)
    for b in range(shape.batch):
        src = token_rows(old.owned[b], inputs.shape.page, tok, inputs.device)
        dst = token_rows(new.owned[b], shape.page, tok, inputs.device)
        values = flat_old[src]
        kv[dst] = values if values.dtype == torch.bfloat16 else (values.to(torch.bfloat16) * inputs.kv_scale)
    kv = kv.view(new.num_pages, shape.page, HEAD_DIM)
    scale = 1.0
    if shape.kv_dtype == "fp8":
        scale = 0.5  # as build_inputs
        kv = (kv / scale).to(torch.float8_e4m3fn)
    return MLAInputs(shape, new, kv, scale, inputs.q)


def token_rows(pages: tuple[int, ...], page: int, tok: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Row of each token in a ``[pages·page, 576]`` view of the cache."""
    ids = torch.tensor(pages, dtype=torch.long, device=device)
    return ids[tok // page] * page + tok % page
