"""A DCP row's call: one rank's attention over its shard, then the merge of all ranks' partials.

Decode context parallelism splits the context over N ranks; each attends with
all heads over its shard and returns (output, LSE); after an all-gather the N
partials are merged. The measured rank is the last (its shard holds the verify
tokens: :meth:`traceattr.core.shapes.Shape.rank_share`). The timed call here is that
rank's attention, the copy of its partial into the gathered buffer (where the
all-gather would have put it), and flashinfer's ``merge_states`` over the N
partials. The other ranks' partials are synthetic — random outputs of the
measured rank's magnitude with LSEs near its own — because only their merge
runs on this GPU; :func:`traceattr.backends.reference.merge_reference` checks
the merge of exactly those partials. Communication is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from traceattr.backends.base import CallPlan


@dataclass
class DcpCall:
    plan: CallPlan
    call: Any  # the rank's call, prepared with lse=True
    partials: torch.Tensor  # [N, rows, H, 512]: other ranks first, the measured rank last
    partial_lse: torch.Tensor  # [N, rows, H], base 2
    merge: Any

    def run(self) -> torch.Tensor:
        out, lse = self.call.run()
        self.partials[-1].copy_(self.call.output_rows(out))
        self.partial_lse[-1].copy_(lse)
        n, rows, heads, dim = self.partials.shape
        merged, _ = self.merge(self.partials.view(1, n, rows * heads, dim), self.partial_lse.view(1, n, -1))
        return merged.view(rows, heads, dim)

    def output_rows(self, out: torch.Tensor) -> torch.Tensor:
        return out

    def rank_rows(self) -> torch.Tensor:
        """The measured rank's own output of the last run (for checking it against the reference)."""
        return self.partials[-1]


def prepare_dcp(plan: CallPlan, call: Any, ranks: int, seed: int = 0) -> DcpCall:
    """Wrap *call* (prepared with ``lse=True``) as the last of *ranks* DCP ranks."""
    import flashinfer

    out, lse = call.run()
    rows = call.output_rows(out)
    gen = torch.Generator(device=rows.device).manual_seed(seed + 1)
    partials = torch.empty(ranks, *rows.shape, dtype=rows.dtype, device=rows.device)
    partial_lse = torch.empty(ranks, *lse.shape, dtype=torch.float32, device=rows.device)
    scale = rows.float().std().item()
    for r in range(ranks - 1):
        noise = torch.randn(rows.shape, generator=gen, device=rows.device)
        partials[r] = (noise * scale).to(rows.dtype)
        partial_lse[r] = lse.float() + torch.randn(lse.shape, generator=gen, device=rows.device)
    return DcpCall(plan, call, partials, partial_lse, flashinfer.merge_states)
