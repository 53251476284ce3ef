"""A DCP row's call: one rank's attention over its shard, then the merge of all ranks' partials.

Decode context parallelism splits the context over N ranks; each attends with
all heads over its shard and returns (output, base-2 LSE); after an all-gather
the N partials are merged (``flashinfer.merge_states``, whose LSEs are base 2).
The timed call is the measured rank's attention (the last rank), the copy of
its partial into the gathered buffer (where the all-gather would have put it),
and the merge of the N partials. Communication is not modelled. Two paths
(:data:`DcpPath`, recorded per arm as ``dcp_path`` in runner.json):

``flashinfer dcp`` — backends with flashinfer's own DCP (``cute-dsl``,
:attr:`traceattr.backends.flashinfer_trtllm.TrtllmDecode.native_dcp`). Its
ranks are cyclic: rank r holds the global positions p with p mod N = r, its
local token k is position N·k + r (:class:`DcpRank`), and each call is told
``enable_dcp``, ``cp_world=N``, ``cp_rank=r`` and ``causal_seqlens_kv_global``:
per request the exclusive causal bound of the newest query token, i.e. the
whole context ``ctx`` (flashinfer masks query row i of q at global position
``ctx − q + 1 + i``, the torch reference's rule). Every rank's call runs once
at prepare on its own shard (:func:`dcp_rank_inputs`;
the measured rank's shard is the row's shared inputs), so all N partials are
real; the merged output is checked against the torch reference over the whole
context those shards interleave into.

``emulated`` — every other backend that returns an LSE (fa3, FlashMLA): the
measured rank's call over the row's shard (contiguous, the verify tokens at
its end: :meth:`traceattr.core.shapes.Shape.rank_share`), the other ranks'
partials synthetic — random outputs of its magnitude with LSEs near its own —
because only their merge runs on this GPU. Its own output and LSE are checked
against the torch reference over its shard, the merge against a torch merge
of exactly those partials.

(``--ranks N`` runs real ranks, one per GPU: :mod:`traceattr.runner.ranks`;
there ``contiguous shards`` names the third path, real ranks of a backend
without flashinfer's DCP.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from traceattr.backends.base import SM_SCALE, CallPlan
from traceattr.core.shapes import Shape

if TYPE_CHECKING:
    import torch

    from traceattr.backends.inputs import MLAInputs

DcpPath = Literal["flashinfer dcp", "emulated", "contiguous shards"]
FLASHINFER_DCP: DcpPath = "flashinfer dcp"
EMULATED: DcpPath = "emulated"
CONTIGUOUS_SHARDS: DcpPath = "contiguous shards"


@dataclass(frozen=True)
class DcpRank:
    """Rank *rank* of flashinfer's cyclic DCP over the DCP row *row* (``ctx``: the whole context)."""

    row: Shape
    rank: int

    def __post_init__(self) -> None:
        if not (self.row.dcp > 1 and 0 <= self.rank < self.row.dcp):
            raise ValueError(f"rank {self.rank} is not a rank of {self.row.name}")

    @property
    def world(self) -> int:
        return self.row.dcp

    def positions(self) -> range:
        """Global token positions this rank holds, in its local order (local token k is position N·k + r)."""
        return range(self.rank, self.row.ctx, self.world)

    @property
    def local_tokens(self) -> int:
        """Tokens per request on this rank; the same count as ``Shape.dcp_shards()[rank]`` (tested)."""
        return len(self.positions())

    def shape(self, data_shape: Shape | None = None) -> Shape:
        """This rank's shard as an ordinary shape (*data_shape*: the arm's page size and KV dtype of the row)."""
        return (data_shape or self.row).with_(ctx=self.local_tokens, dcp=1)

    def global_lens(self) -> tuple[int, ...]:
        """``causal_seqlens_kv_global``: per request, the whole context (every request holds ``ctx`` tokens)."""
        return tuple(self.row.kv_lens())


def dcp_path(backend: Any) -> DcpPath:
    """Which path a DCP row of *backend* takes on one GPU: flashinfer's own where the backend says it has one
    (``native_dcp``, cute-dsl's decode), else the emulation. Asked, not type-checked, so this module and the
    backends that use its :class:`DcpRank` do not import each other."""
    return FLASHINFER_DCP if getattr(backend, "native_dcp", False) is True else EMULATED


@dataclass
class DcpCall:
    plan: CallPlan
    call: Any  # the measured rank's call, prepared with lse=True
    partials: torch.Tensor  # [N, rows, H, 512]: other ranks first, the measured rank last
    partial_lse: torch.Tensor  # [N, rows, H], base 2
    merge: Any
    path: DcpPath = EMULATED
    whole: MLAInputs | None = None  # flashinfer dcp: the whole context the ranks' shards interleave into

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

    def check(self, rows: torch.Tensor, shard_reference: Callable[[], tuple[torch.Tensor, torch.Tensor]],
              limit: float, lse_limit: float, entry: dict[str, Any]) -> str | None:  # fmt: skip
        """Check the merged *rows* of one run (fields into *entry*); the refusal, or None.

        *shard_reference*: the torch (output, base-2 LSE) over the measured rank's shard (emulated path).
        """
        from traceattr.backends.reference import lse_error, merge_reference, mla_reference_lse, relative_error

        entry["merge_relative_error"] = relative_error(rows, merge_reference(self.partials, self.partial_lse))
        if not entry["merge_relative_error"] <= limit:
            return f"DCP merge differs from a torch merge: relative error {entry['merge_relative_error']:.3g}"
        if self.whole is not None:
            ref, ref_lse = mla_reference_lse(self.whole, self.whole.layout.requests(), SM_SCALE)
            lse, checked, what = merged_lse(self.partial_lse), rows, "the merged LSE"
        else:
            ref, ref_lse = shard_reference()
            lse, checked, what = self.partial_lse[-1], self.rank_rows(), "the rank's LSE"
        entry["lse_abs_error"] = lse_error(lse, ref_lse)
        if not entry["lse_abs_error"] <= lse_limit:
            return f"{what} differs from the torch reference by {entry['lse_abs_error']:.3g} (base 2 expected)"
        entry["relative_error"] = relative_error(checked, ref)
        if not entry["relative_error"] <= limit:
            return f"output differs from the reference: relative error {entry['relative_error']:.3g} > {limit}"
        return None


def merged_lse(partial_lse: torch.Tensor) -> torch.Tensor:
    """The base-2 LSE of the union of the ranks' keys: log2 Σ_r 2^lse_r, ``[rows, H]``."""
    import math

    import torch

    return torch.logsumexp(partial_lse.float() * math.log(2), dim=0) / math.log(2)


def prepare_dcp(backend: Any, row: Shape, inputs: MLAInputs, seed: int = 0) -> DcpCall:
    """*backend*'s DCP call on *row* over the measured (last) rank's shard *inputs* (the arm's page and KV dtype)."""
    import flashinfer

    if dcp_path(backend) == FLASHINFER_DCP:
        return _flashinfer_dcp(backend, row, inputs, seed, flashinfer.merge_states)
    return _emulated_dcp(backend.prepare(inputs.shape, inputs, lse=True), row.dcp, seed, flashinfer.merge_states)


def _flashinfer_dcp(backend: Any, row: Shape, inputs: MLAInputs, seed: int, merge: Any) -> DcpCall:
    import torch

    data_row = row.with_(page=inputs.shape.page, kv_dtype=inputs.shape.kv_dtype)
    shards = dcp_rank_inputs(inputs, data_row, seed)
    calls = [backend.prepare(s.shape, s, dcp=DcpRank(data_row, r)) for r, s in enumerate(shards)]
    states = [c.run() for c in calls]  # every rank once: real partials
    partials = torch.stack([c.output_rows(out) for c, (out, _) in zip(calls, states, strict=True)])
    partial_lse = torch.stack([lse.float() for _, lse in states])
    return DcpCall(calls[-1].plan, calls[-1], partials, partial_lse, merge, FLASHINFER_DCP, dcp_whole(shards, data_row))


def _emulated_dcp(call: Any, ranks: int, seed: int, merge: Any) -> DcpCall:
    """Wrap *call* (prepared with ``lse=True``) as the last of *ranks* ranks, the others' partials synthetic."""
    import torch

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
    return DcpCall(call.plan, call, partials, partial_lse, merge, EMULATED)


def dcp_rank_inputs(measured: MLAInputs, row: Shape, seed: int = 0) -> list[MLAInputs]:
    """Every rank's shard of the DCP *row* for flashinfer's cyclic DCP, rank 0 first; the last is *measured*.

    The other ranks get their own random tokens (seed ``seed + 1 + r``) in *measured*'s page size, KV
    dtype and page order, and *measured*'s queries: every rank attends with the same query rows.
    """
    from traceattr.backends.inputs import MLAInputs, build_inputs

    out = []
    for r in range(row.dcp - 1):
        shard = build_inputs(DcpRank(row, r).shape(measured.shape), device=measured.device,
                             shuffle=measured.layout.shuffle, seed=seed + 1 + r)  # fmt: skip
        out.append(MLAInputs(shard.shape, shard.layout, shard.kv, measured.kv_scale, measured.q))
    return [*out, measured]


def dcp_whole(shards: list[MLAInputs], row: Shape) -> MLAInputs:
    """The whole context *shards* (rank order) interleave into: rank r's local token k at position N·k + r.

    What the torch reference reads to check the merged output of flashinfer's DCP ranks.
    """
    import torch

    from traceattr.backends.inputs import MLAInputs, token_rows
    from traceattr.backends.layout import KvLayout
    from traceattr.core.shapes import HEAD_DIM

    first = shards[0]
    shape = first.shape.with_(ctx=row.ctx)
    layout = KvLayout(shape)
    # copied as bytes: index_put has no float8 kernel
    kv = torch.zeros(layout.num_pages * shape.page, HEAD_DIM, dtype=first.kv.dtype, device=first.device)
    flat = kv.view(torch.uint8).view(-1, HEAD_DIM * first.kv.element_size())
    for r, shard in enumerate(shards):
        where = DcpRank(row, r).positions()
        pos = torch.arange(where.start, where.stop, where.step, device=first.device)
        local = torch.arange(len(where), device=first.device)
        src_flat = shard.kv.view(torch.uint8).view(-1, HEAD_DIM * shard.kv.element_size())
        for b in range(shape.batch):
            flat[token_rows(layout.owned[b], shape.page, pos, first.device)] = src_flat[
                token_rows(shard.layout.owned[b], shape.page, local, first.device)
            ]
    return MLAInputs(shape, layout, kv.view(layout.num_pages, shape.page, HEAD_DIM), first.kv_scale, first.q)
