"""A candidate MLA decode kernel written in plain torch, as a traceattr backend plug-in.

The whole interface a plug-in implements (the built-in backends implement the same):

* ``caps`` — a :class:`traceattr.backends.base.Capabilities`: which GPUs, KV
  dtypes, page sizes, heads and query patterns it accepts (traceattr says why
  it skips a shape from these, before importing anything heavy), and ``lse=True``
  when ``prepare(..., lse=True)`` gives a call returning (output, base-2 LSE), which
  makes it usable on DCP rows;
* ``plan(shape) -> CallPlan`` — the call's arguments as data (runs on any machine);
* ``prepare(shape, inputs, *, lse=False) -> call`` — build the call on the GPU from
  the shared inputs (``inputs.kv`` ``[pages, page, 576]``, ``inputs.q``
  ``[rows, heads, 576]``, ``inputs.layout`` the pages of each request); the call
  has ``run()`` (launch once, return the output) and ``output_rows(out)``
  (``[rows, heads, 512]`` in request order, compared with traceattr's torch reference).

The kernel: per request, gather the request's cached tokens (one gather), scores
``q·k`` in bf16 with fp32 accumulation, softmax in fp32 with the verify rows'
causal tail masked, then ``p·v`` on the first 512 dims. It is slow (it writes the
gathered KV and the scores to memory), which is the point of timing it against fa3.

Torch is imported inside ``prepare`` only: planning and validation need no GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from traceattr.backends.base import SM_SCALE, CallPlan, Capabilities, TensorSpec
from traceattr.backends.layout import KvLayout
from traceattr.core.shapes import HEAD_DIM, LATENT_DIM, Shape

CAPS = Capabilities(
    name="torch-mla",
    family="torch",
    archs=frozenset({(8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (10, 3), (12, 0)}),
    kv_dtypes=frozenset({"bf16"}),
    patterns=frozenset({"uniform", "ragged"}),
    packages=("torch",),
    structure="per request: gather the KV pages, bf16 matmul, fp32 softmax, bf16 matmul (torch ops)",
    lse=True,
)


@dataclass(frozen=True)
class TorchMLA:
    caps: Capabilities = CAPS

    def plan(self, shape: Shape) -> CallPlan:
        req = KvLayout(shape).requests()
        tensors = {
            "query": TensorSpec((req.total_q, shape.heads, HEAD_DIM), "bfloat16"),
            "kv_cache": TensorSpec((KvLayout(shape).num_pages, shape.page, HEAD_DIM), "bfloat16"),
            "token_rows": TensorSpec((sum(req.kv_lens),), "int32"),
        }
        return CallPlan(
            self.caps.name, shape, tensors, {"sm_scale": SM_SCALE}, ("one gather + two matmuls per request",)
        )

    def prepare(self, shape: Shape, inputs: Any, *, lse: bool = False) -> TorchMLACall:
        import torch

        req = inputs.layout.requests()
        rows = []
        for pages, length in zip(req.pages, req.kv_lens, strict=True):
            tok = torch.arange(length, device=inputs.device)
            ids = torch.tensor(pages, dtype=torch.long, device=inputs.device)
            rows.append(ids[tok // shape.page] * shape.page + tok % shape.page)
        return TorchMLACall(self.plan(shape), inputs.q, inputs.kv.view(-1, HEAD_DIM), rows, req.qo_indptr, lse)


@dataclass
class TorchMLACall:
    plan: CallPlan
    q: Any  # [rows, H, 576]
    kv: Any  # [tokens, 576]
    token_rows: list[Any]  # per request: cache row of each of its tokens
    qo_indptr: list[int]
    lse: bool = False

    def run(self) -> Any:
        import torch

        outs, lses = [], []
        for r, rows in enumerate(self.token_rows):
            q = self.q[self.qo_indptr[r] : self.qo_indptr[r + 1]]  # [S, H, 576]
            s_len, heads = q.shape[0], q.shape[1]
            keys = self.kv[rows]  # [L, 576]: the gather
            scores = (q.reshape(s_len * heads, HEAD_DIM) @ keys.T).float() * SM_SCALE  # [S·H, L]
            scores = scores.view(s_len, heads, -1)
            if s_len > 1:  # row i sees the first L - S + 1 + i tokens
                tail = scores[:, :, -(s_len - 1) :]
                i = torch.arange(s_len, device=q.device)[:, None]
                j = torch.arange(s_len - 1, device=q.device)[None, :]
                tail.masked_fill_((j >= i)[:, None, :], float("-inf"))
            if self.lse:
                lses.append(torch.logsumexp(scores, -1) / math.log(2.0))
            probs = torch.softmax(scores, -1).to(torch.bfloat16)
            outs.append((probs.view(s_len * heads, -1) @ keys[:, :LATENT_DIM]).view(s_len, heads, LATENT_DIM))
        out = torch.cat(outs) if len(outs) > 1 else outs[0]
        if self.lse:
            return out, torch.cat(lses) if len(lses) > 1 else lses[0]
        return out

    def output_rows(self, out: Any) -> Any:
        return out
