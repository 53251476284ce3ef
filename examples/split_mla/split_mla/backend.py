"""``split-mla``: our own split-KV MLA decode (Triton), instrumented with phase stamps.

Arms: ``split-mla[merge=reduce]`` (split kernel, then a reduce kernel) and
``split-mla[merge=inkernel]`` (the last program of each row block to finish merges,
counted with an atomic); ``splits=N`` fixes the KV splits (default: enough programs
to fill the GPU, at least ``min_chunk`` tokens each); ``plain`` compiles the
kernels without stamps (the overhead measurement). Uniform query layouts, bf16 KV.

The call exposes what the runner's phase hook (:mod:`traceattr.runner.stamps`) reads:
``stamp_buffer`` (int64 ``[rows, WIDTH]``, zeroed by the runner after it copies each
call's stamps), ``stamp_header`` (the kernels and their boundary names, the layout
of docs/phases.md) and ``floor_probes`` (an empty kernel with the real grid, and the
kernel on one tile). Torch and Triton are imported inside ``prepare`` only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from traceattr.backends.base import SM_SCALE, CallPlan, Capabilities, OptionSpec, TensorSpec
from traceattr.backends.layout import KvLayout
from traceattr.core.shapes import HEAD_DIM, LATENT_DIM, Shape

BLOCK_M = 16  # query rows per program (heads × verify tokens, flattened)
# Tiles: 32 tokens, 4 in shared memory, so 3 copies are in flight while one is computed. 64-token tiles
# make both products wgmma, but only 2 fit beside Q (72 KiB each, 227 KiB a CTA): Triton then issues the
# next tile's copy after the current tile's MMAs and waits for it at once, one tile in flight at a time.
BLOCK_N = 32  # KV tokens per tile
# Triton 3.6 builds the 64-token tile's Kᵀ·Pᵀ wgmma with an out-of-bounds shared-memory read (compute-sanitizer
# on an H100, 2026-12-07: every stage count, plain and stamped), so no tile above 32 tokens is run
MAX_BLOCK_N = 32
STAGES = 4  # Triton's num_stages: tiles in shared memory
# Tiles loaded before the main loop, together: 0, every tile is the loop's (pipelined); 1, the first tile peeled
# out, with its stamps (tile_loaded, first_mma), the loop's copies starting behind it; 2, the second tile's copy
# beside the first. H100, bench.py, plain reduce arm (µs, peel 0 / 1 / 2): q1_ctx8k 18.4 / 21.2 / 23.7,
# q1_ctx131k 77.7 / 88.6 / 92.5, q8_ctx8k 41.4 / 46.8 / 49.9, q8_ctx32k 125.4 / 140.8 / 145.7. Peeled tiles
# load into registers: 255 of them, with 8-32 bytes of stack (peel=0: 128, none)
PEEL = 0
MIN_CHUNK = 64  # tokens per split at least: short rows spread over the GPU too
MERGE_VALUES = 4096  # partial values a merge step loads at once ([splits, dims]): 32 registers a thread
SMS = 132  # H200

CAPS = Capabilities(
    name="split-mla",
    family="split-mla",
    archs=frozenset({(8, 0), (8, 9), (9, 0), (10, 0), (12, 0)}),
    kv_dtypes=frozenset({"bf16"}),
    patterns=frozenset({"uniform"}),
    packages=("torch", "triton"),
    structure="split-KV Triton kernel (16 query rows × one KV split per program) + reduce kernel or in-kernel merge",
    options=(
        OptionSpec(
            "merge",
            "how splits are merged: a reduce kernel, or the last arriver",
            "choice",
            ("reduce", "inkernel"),
            field="merge",
        ),
        OptionSpec("splits", "KV splits (default: fill the GPU)", "int", field="splits"),
        OptionSpec("min_chunk", f"tokens per split at least (default {MIN_CHUNK})", "int", field="min_chunk"),
        OptionSpec("block_n", f"KV tokens per tile (default {BLOCK_N}, at most {MAX_BLOCK_N})", "int", field="block_n"),
        OptionSpec("stages", f"tiles in flight, Triton's num_stages (default {STAGES})", "int", field="stages"),
        OptionSpec(
            "peel", f"tiles loaded together before the loop: 0, 1 or 2 (default {PEEL})", "int", minimum=0, field="peel"
        ),
        OptionSpec("plain", "compile without phase stamps", "flag", field="plain", program=False),
    ),
)


def geometry(shape: Shape, splits: int = 0, block_n: int = BLOCK_N, min_chunk: int = MIN_CHUNK) -> tuple[int, int, int]:
    """(splits, tokens per split, row blocks) of *shape*'s split kernel."""
    mblocks = -(-shape.q * shape.heads // BLOCK_M)
    if splits <= 0:
        wanted = max(1, SMS // (shape.batch * mblocks))
        chunk = max(min_chunk, -(-shape.ctx // wanted))
    else:
        chunk = -(-shape.ctx // splits)
    chunk = -(-chunk // block_n) * block_n
    return -(-shape.ctx // chunk), chunk, mblocks


def merge_dims(splits: int) -> int:
    """Latent dims a merge step loads for every split at once (a power of two, ≤ 512)."""
    return min(LATENT_DIM, max(16, MERGE_VALUES // triton_next_pow2(splits)))


@dataclass(frozen=True)
class SplitMLA:
    caps: Capabilities = CAPS
    merge: str = "reduce"
    splits: int = 0
    plain: bool = False
    min_chunk: int = MIN_CHUNK
    block_n: int = BLOCK_N
    stages: int = STAGES
    peel: int = PEEL

    def geometry(self, shape: Shape) -> tuple[int, int, int]:
        return geometry(shape, self.splits, self.block_n, self.min_chunk)

    def plan(self, shape: Shape) -> CallPlan:
        splits, chunk, mblocks = self.geometry(shape)
        rows = mblocks * BLOCK_M
        tensors = {
            "query": TensorSpec((shape.batch * shape.q, shape.heads, HEAD_DIM), "bfloat16"),
            "kv_cache": TensorSpec((KvLayout(shape).num_pages, shape.page, HEAD_DIM), "bfloat16"),
            "partial_out": TensorSpec((shape.batch, rows, splits, LATENT_DIM), "float32"),
            "partial_lse": TensorSpec((shape.batch, rows, splits), "float32"),
        }
        notes = (
            f"{splits} splits × {chunk} tokens, {mblocks} row blocks, merge={self.merge}, "
            f"{self.block_n}-token tiles × {self.stages} stages, {self.peel} peeled",
        )
        return CallPlan(self.caps.name, shape, tensors, {"sm_scale": SM_SCALE}, notes)

    def prepare(self, shape: Shape, inputs: Any, *, lse: bool = False) -> SplitMLACall:
        if lse:
            raise ValueError("split-mla returns no LSE (no DCP rows)")
        if self.block_n > MAX_BLOCK_N:
            raise ValueError(f"split-mla: block_n {self.block_n} is refused: Triton 3.6 miscompiles tiles above "
                             f"{MAX_BLOCK_N} tokens (an out-of-bounds shared-memory read, docs/phases.md)")  # fmt: skip
        if self.peel not in (0, 1, 2):
            raise ValueError(f"split-mla: peel {self.peel} is refused: 0, 1 or 2 tiles are loaded before the loop")
        if max(shape.page, self.block_n) % min(shape.page, self.block_n):
            raise ValueError(f"split-mla: page {shape.page} and block_n {self.block_n} must divide one another")
        import torch

        splits, chunk, mblocks = self.geometry(shape)
        dev = inputs.device
        req = inputs.layout.requests()
        rows_p = mblocks * BLOCK_M
        return SplitMLACall(
            plan=self.plan(shape),
            shape=shape,
            merge=self.merge,
            stamps=not self.plain,
            splits=splits,
            chunk=chunk,
            mblocks=mblocks,
            block_n=self.block_n,
            stages=self.stages,
            peel=self.peel,
            q=inputs.q,
            kv=inputs.kv,
            block_table=torch.tensor(req.block_table(), dtype=torch.int32, device=dev),
            part_o=torch.empty(shape.batch, rows_p, splits, LATENT_DIM, dtype=torch.float32, device=dev),
            part_lse=torch.empty(shape.batch, rows_p, splits, dtype=torch.float32, device=dev),
            out=torch.empty(shape.batch * shape.q, shape.heads, LATENT_DIM, dtype=torch.bfloat16, device=dev),
            counter=torch.zeros(shape.batch * mblocks, dtype=torch.int32, device=dev),
        )


@dataclass
class SplitMLACall:
    plan: CallPlan
    shape: Shape
    merge: str
    stamps: bool
    splits: int
    chunk: int
    mblocks: int
    block_n: int
    stages: int
    peel: int
    q: Any
    kv: Any
    block_table: Any
    part_o: Any
    part_lse: Any
    out: Any
    counter: Any
    stamp_buffer: Any = None
    stamp_header: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        import torch

        from split_mla import kernels

        self.k = kernels
        split_rows = self.shape.batch * self.mblocks * self.splits
        reduce_rows = self.shape.batch * self.mblocks * BLOCK_M * (LATENT_DIM // merge_dims(self.splits))
        reduce_rows = reduce_rows if self.merge == "reduce" else 0
        parts = [{"kernel": "split_kv", "boundaries": list(kernels.split_boundaries(self.peel)), "rows": split_rows}]
        if reduce_rows:
            parts.append({"kernel": "reduce", "boundaries": list(kernels.REDUCE_BOUNDARIES), "rows": reduce_rows})
        self.stamp_header = {"layout": 1, "width": kernels.WIDTH, "kernels": parts}
        self.stamp_buffer = torch.zeros(max(1, split_rows + reduce_rows), kernels.WIDTH, dtype=torch.int64,
                                        device=self.q.device)  # fmt: skip
        if not self.stamps:
            self.stamp_header = {}  # the runner records nothing for a plain arm
        self.scale_log2 = SM_SCALE / math.log(2.0)
        self.floor_probes = {"empty": self.run_empty, "one_tile": self.run_one_tile, "grid_tile": self.run_grid_tile}

    def launch_split(self, kv_len: int, chunk: int, splits: int, merge_inkernel: bool) -> None:
        s = self.shape
        grid = (splits, self.mblocks, s.batch)
        self.k.split_mla_split_kv[grid](
            self.q, self.kv, self.block_table, self.part_o, self.part_lse, self.out, self.counter, self.stamp_buffer,
            kv_len, chunk, self.block_table.stride(0), self.scale_log2,
            ROWS=s.q * s.heads, S=s.q, H=s.heads, PAGE=s.page, BLOCK_M=BLOCK_M, BLOCK_N=self.block_n,
            SPLITS_P2=triton_next_pow2(splits), MERGE_INKERNEL=merge_inkernel, MERGE_DC=merge_dims(splits),
            STAMPS=self.stamps, W=self.k.WIDTH, PEEL=self.peel, num_warps=4, num_stages=self.stages,
        )  # fmt: skip

    def run(self) -> Any:
        self._launch(self.shape.ctx, self.chunk, self.splits)
        return self.out

    def _launch(self, kv_len: int, chunk: int, splits: int) -> None:
        """The split kernel over *kv_len* tokens in *splits* of *chunk*, then the merge of the arm."""
        inkernel = self.merge == "inkernel"
        self.launch_split(kv_len, chunk, splits, inkernel)
        if not inkernel:
            self.launch_reduce(splits)

    def _launch_plain(self, kv_len: int, chunk: int, splits: int) -> None:
        """A floor probe: :meth:`_launch` without stamps (they would land in the call's rows)."""
        was, self.stamps = self.stamps, False
        self._launch(kv_len, chunk, splits)
        self.stamps = was

    def launch_reduce(self, splits: int) -> None:
        s = self.shape
        rows_p = self.mblocks * BLOCK_M
        dims = merge_dims(splits)
        grid = (rows_p, LATENT_DIM // dims, s.batch)
        self.k.split_mla_reduce[grid](
            self.part_o, self.part_lse, self.out, self.stamp_buffer, splits, ROWS=s.q * s.heads, ROWS_P=rows_p,
            DB=dims, SPLITS_P2=triton_next_pow2(splits), STAMPS=self.stamps, W=self.k.WIDTH,
            ROW0=s.batch * self.mblocks * self.splits, num_warps=4,
        )  # fmt: skip

    def run_empty(self) -> None:
        """Launch + exit: an empty kernel with the split kernel's grid."""
        self.k.split_mla_empty[(self.splits, self.mblocks, self.shape.batch)](self.stamp_buffer, num_warps=4)

    def run_one_tile(self) -> None:
        """The kernel on one tile: one split of one tile (plain, same merge path), the smallest geometry."""
        self._launch_plain(min(self.block_n, self.shape.ctx), self.block_n, 1)

    def run_grid_tile(self) -> None:
        """The call's fixed cost: its grid and merge, each split cut to its first tile (plain)."""
        self._launch_plain(min(self.splits * self.block_n, self.shape.ctx), self.block_n, self.splits)

    def output_rows(self, out: Any) -> Any:
        return out


def triton_next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())
