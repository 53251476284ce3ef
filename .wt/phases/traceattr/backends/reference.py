"""Torch reference for MLA decode, chunked over the cache so a million tokens fit.

For each request, query row i of S attends to the first ``L - S + 1 + i``
cached tokens (causal, aligned to the end, as verify tokens are): scores
``q·k`` over all 576 dims times ``sm_scale``, softmax, times the first 512
dims of the same cached vectors. Keys are streamed in chunks with a running
maximum and sum (the flash-attention recurrence) in fp32, so memory stays
``rows × heads × chunk`` whatever the context. The same recurrence gives each
row's log-sum-exp of its scores (base 2, as DCP merges use it), which checks
that a backend's LSE is the one a merge needs, not only self-consistent.
"""

from __future__ import annotations

import math

import torch

from traceattr.backends.inputs import MLAInputs
from traceattr.backends.layout import Requests
from traceattr.core.shapes import LATENT_DIM


def mla_reference(inputs: MLAInputs, requests: Requests, sm_scale: float, chunk: int = 16384) -> torch.Tensor:
    """``[total_q, heads, 512]`` fp32 outputs of *requests* over *inputs*."""
    return mla_reference_lse(inputs, requests, sm_scale, chunk)[0]


@torch.no_grad()
def mla_reference_lse(
    inputs: MLAInputs, requests: Requests, sm_scale: float, chunk: int = 16384
) -> tuple[torch.Tensor, torch.Tensor]:
    """(``[total_q, heads, 512]`` outputs, ``[total_q, heads]`` base-2 log-sum-exp of the scaled scores), fp32."""
    page = requests.page_size
    outs, lses = [], []
    for r in range(requests.batch):
        lo, hi = requests.qo_indptr[r], requests.qo_indptr[r + 1]
        rows = inputs.q[lo:hi].float() * sm_scale  # [S, H, 576]
        s_len, length = hi - lo, requests.kv_lens[r]
        pages = torch.tensor(requests.pages[r], dtype=torch.long, device=inputs.device)
        limit = length - s_len + 1 + torch.arange(s_len, device=inputs.device)  # keys each row may see
        best = torch.full(rows.shape[:2], float("-inf"), device=inputs.device)
        total = torch.zeros(rows.shape[:2], device=inputs.device)
        acc = torch.zeros(*rows.shape[:2], LATENT_DIM, device=inputs.device)
        for start in range(0, length, chunk):
            tok = torch.arange(start, min(length, start + chunk), device=inputs.device)
            keys = inputs.kv[pages[tok // page], tok % page].float() * inputs.kv_scale  # [C, 576]
            scores = torch.einsum("shd,cd->shc", rows, keys)
            scores.masked_fill_((tok[None, :] >= limit[:, None])[:, None, :], float("-inf"))
            new_best = torch.maximum(best, scores.amax(-1))
            weights = torch.exp(scores - new_best[..., None])
            keep = torch.exp(best - new_best)
            total = total * keep + weights.sum(-1)
            acc = acc * keep[..., None] + torch.einsum("shc,cd->shd", weights, keys[:, :LATENT_DIM])
            best = new_best
        outs.append(acc / total[..., None])
        lses.append((best + torch.log(total)) / math.log(2))
    return torch.cat(outs), torch.cat(lses)


# largest |LSE − reference| in base-2 units per KV dtype (0.05: a merge weight off by 3.5%); an LSE in
# natural-log units is off by 0.44 × |LSE|, several units at any real context
LSE_LIMIT = {"bf16": 0.05, "fp8": 0.25}


def lse_error(lse: torch.Tensor, ref: torch.Tensor) -> float:
    """Largest |LSE − reference LSE| (base 2): a DCP merge weighs each rank's partial by it.

    A merge compared with a torch merge of the same partials is self-consistent whatever the LSE
    means; only this comparison with the true scores shows the LSE is the one a merge needs.
    """
    return float((lse.float() - ref).abs().max())


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """‖out − ref‖ / ‖ref‖ over all rows (fp32)."""
    out = out.float()
    return float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref).clamp_min(1e-30))


@torch.no_grad()
def merge_reference(partials: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    """Merge ``[N, rows, H, D]`` partial outputs by their base-2 LSEs ``[N, rows, H]``, in fp32."""
    weights = torch.exp2(lse.float() - lse.float().amax(0, keepdim=True))
    return (weights[..., None] * partials.float()).sum(0) / weights.sum(0)[..., None]
