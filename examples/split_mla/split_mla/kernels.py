"""Triton kernels of the split-KV MLA decode, with optional phase stamps.

``split_kv``: one program per (KV split, block of 16 query rows, request). It loads
its Q rows, runs its split's tiles with an online softmax (``PEEL``: 0, all in the
pipelined loop; 1, the first tile loaded and computed before the loop, so "first tile
loaded" and "first MMA" are stamp points in the plain kernel too; 2, the second tile
loaded beside it), and stores the partial output (fp32) and its base-2 LSE. With
``MERGE_INKERNEL`` the program then increments the row block's counter; the last
one to arrive merges all splits of the block and resets the counter (so a CUDA-graph
replay finds it at zero). Otherwise ``reduce`` merges them in a second launch.

The tile's tokens are the MMAs' M dimension: scores are ``K · Qᵀ`` (``[BLOCK_N, 16]``)
and the output is accumulated transposed, ``Kᵀ · Pᵀ`` (``[512, 16]``, a wgmma reading
the tile from shared memory; the scores too are a wgmma with 64-token tiles, mma.sync
from ldmatrix with 32), so the tile is never transposed through registers. Written
the other way round (``Q · Kᵀ``, M = 16 query rows) Triton loaded the transposed tile
into registers and spilled (sm_90: 255 registers, 192 bytes of stack).
With pages of at least ``BLOCK_N`` tokens a tile lies in one page: its page number
is one scalar, loaded a tile ahead, so the next tile's copy does not wait on the
block table.

Stamps (``STAMPS``): ``%globaltimer`` (GPU nanoseconds, the clock CUPTI stamps
kernels with) read through inline PTX, one row per program, columns in the order of
``split_boundaries(peel)`` / ``REDUCE_BOUNDARIES`` and the SM id last (docs/phases.md has the
layout). A stamp "after" a load takes a reduction of the loaded values as an operand,
so it cannot be issued before the data arrived; a stamp after stores follows a CTA
barrier. Each stamp is stored where it is taken, at a row address recomputed from the
program ids, so no stamp value or pointer is live across the main loop. Without
``STAMPS`` none of this is compiled in: the plain kernel.
"""

from __future__ import annotations

import triton
import triton.language as tl

SPLIT_BOUNDARIES = ("begin", "tile_loaded", "first_mma", "loop_done", "stored", "merged")
FIRST_TILE = ("tile_loaded", "first_mma")  # a peeled first tile's boundaries: none with peel=0
FIRST_COLS: tl.constexpr = tl.constexpr(len(FIRST_TILE))


def split_boundaries(peel: int) -> tuple[str, ...]:
    """The split kernel's stamp columns as built with *peel* (without a peeled tile, no first-tile stamps)."""
    return tuple(b for b in SPLIT_BOUNDARIES if peel or b not in FIRST_TILE)


REDUCE_BOUNDARIES = ("begin", "merged")  # no stamp inside: waiting on the LSE loads cost the plain kernel's overlap
WIDTH = len(SPLIT_BOUNDARIES) + 1  # stamp columns, then the SM id
LATENT: tl.constexpr = tl.constexpr(512)
ROPE: tl.constexpr = tl.constexpr(64)
DIM: tl.constexpr = tl.constexpr(576)


@triton.jit
def _now(dep):
    # dep: an int32 the stamp must wait for (volatile asm: never hoisted or merged)
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [dep], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _smid(dep):
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [dep], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _dep(x):
    """An int32 that depends on every value of *x* (an fp tensor): what a stamp after a load waits on."""
    return tl.max(x.to(tl.float32)).to(tl.int32)


@triton.jit
def _split_row(stamp_ptr, W: tl.constexpr):
    """This program's stamp row in the split kernel's block (program ids, read again where needed)."""
    row = (tl.program_id(2) * tl.num_programs(1) + tl.program_id(1)) * tl.num_programs(0) + tl.program_id(0)
    return stamp_ptr + row * W


@triton.jit
def _stamp(stamp_ptr, W: tl.constexpr, col: tl.constexpr, dep):
    tl.store(_split_row(stamp_ptr, W) + col, _now(dep))


@triton.jit
def _load_tile(kv_ptr, bt, page, n0, stop, PAGE: tl.constexpr, BLOCK_N: tl.constexpr):
    """The tile of tokens n0 … n0+BLOCK_N (those before *stop*): latent and rope parts, ``[BLOCK_N, dims]``."""
    offs_n = n0 + tl.arange(0, BLOCK_N)
    n_mask = offs_n < stop
    if PAGE >= BLOCK_N:
        row = page.to(tl.int64) * PAGE + offs_n % PAGE  # the tile lies in one page
    else:
        row = tl.load(bt + offs_n // PAGE, mask=n_mask, other=0).to(tl.int64) * PAGE + offs_n % PAGE
    offs_d = tl.arange(0, LATENT)
    offs_r = tl.arange(0, ROPE)
    k_n = tl.load(kv_ptr + row[:, None] * DIM + offs_d[None, :], mask=n_mask[:, None], other=0.0)
    k_r = tl.load(kv_ptr + row[:, None] * DIM + LATENT + offs_r[None, :], mask=n_mask[:, None], other=0.0)
    return k_n, k_r


@triton.jit
def _scores(k_n, k_r, qt_n, qt_r, n0, stop, limit, m_i, l_i, acc, scale_log2, BLOCK_N: tl.constexpr,
            STAMPS: tl.constexpr, stamp_ptr, W: tl.constexpr, FIRST: tl.constexpr):  # fmt: skip
    """One tile's online-softmax step; ``FIRST``: the peeled first tile, stamped."""
    offs_n = n0 + tl.arange(0, BLOCK_N)
    if STAMPS and FIRST:
        _stamp(stamp_ptr, W, 1, _dep(k_r) + _dep(k_n))
    st = tl.dot(k_n, qt_n) + tl.dot(k_r, qt_r)  # [BLOCK_N, BLOCK_M] scores, tokens as M
    st = st * scale_log2
    keep = (offs_n[:, None] < stop) & (offs_n[:, None] < limit[None, :])
    st = tl.where(keep, st, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(st, 0))
    if STAMPS and FIRST:
        _stamp(stamp_ptr, W, 2, tl.max(m_new).to(tl.int32))
    alpha = tl.exp2(m_i - m_new)
    pt = tl.exp2(st - m_new[None, :])
    l_i = l_i * alpha + tl.sum(pt, 0)
    acc = acc * alpha[None, :] + tl.dot(tl.trans(k_n), pt.to(k_n.dtype))  # [LATENT, BLOCK_M]
    return m_new, l_i, acc


@triton.jit
def _merge(part_o, part_lse, out_ptr, b, row0, d0, splits, ROWS, ROWS_P,
           RB: tl.constexpr, DB: tl.constexpr, DC: tl.constexpr, SPLITS_P2: tl.constexpr):  # fmt: skip
    """Merge the splits of rows row0 … row0+RB, latent dims d0 … d0+DB, of request b into out (bf16).

    A row's partials are loaded DC dims at a time, every split at once (``[SPLITS_P2, DC]``,
    ``DC · SPLITS_P2`` ≤ 4096 values): independent loads, in flight together rather than
    one split after another.
    """
    offs_s = tl.arange(0, SPLITS_P2)
    s_ok = offs_s < splits
    for r in range(RB):
        m = row0 + r
        base = (b * ROWS_P + m) * splits
        lse = tl.load(part_lse + base + offs_s, mask=s_ok, other=float("-inf"), cache_modifier=".cg")
        w = tl.exp2(lse - tl.max(lse, 0))
        w = w / tl.sum(w, 0)
        for dc in range(0, DB, DC):
            offs_d = d0 + dc + tl.arange(0, DC)
            o = tl.load(part_o + (base + offs_s)[:, None] * LATENT + offs_d[None, :], mask=s_ok[:, None],
                        other=0.0, cache_modifier=".cg")  # fmt: skip
            tl.store(out_ptr + (b * ROWS + m) * LATENT + offs_d, tl.sum(w[:, None] * o, 0).to(tl.bfloat16),
                     mask=(offs_d < LATENT) & (m < ROWS))  # fmt: skip


@triton.jit
def split_mla_split_kv(q_ptr, kv_ptr, bt_ptr, part_o, part_lse, out_ptr, counter_ptr, stamp_ptr,
             kv_len, chunk, bt_stride, scale_log2,
             ROWS: tl.constexpr, S: tl.constexpr, H: tl.constexpr, PAGE: tl.constexpr,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SPLITS_P2: tl.constexpr,
             MERGE_INKERNEL: tl.constexpr, MERGE_DC: tl.constexpr, STAMPS: tl.constexpr, W: tl.constexpr,
             PEEL: tl.constexpr):  # fmt: skip
    split = tl.program_id(0)
    mb = tl.program_id(1)
    b = tl.program_id(2)
    splits = tl.num_programs(0)
    mblocks = tl.num_programs(1)
    if STAMPS:
        _stamp(stamp_ptr, W, 0, split)
        tl.store(_split_row(stamp_ptr, W) + W - 1, _smid(split).to(tl.int64))
    ROWS_P = mblocks * BLOCK_M
    offs_m = mb * BLOCK_M + tl.arange(0, BLOCK_M)
    m_ok = offs_m < ROWS
    q_base = q_ptr + (b * ROWS + offs_m)[:, None] * DIM
    qt_n = tl.trans(tl.load(q_base + tl.arange(0, LATENT)[None, :], mask=m_ok[:, None], other=0.0))
    qt_r = tl.trans(tl.load(q_base + LATENT + tl.arange(0, ROPE)[None, :], mask=m_ok[:, None], other=0.0))
    limit = kv_len - S + 1 + offs_m // H  # row m is verify token m // H: the causal tail
    start = split * chunk
    stop = tl.minimum(start + chunk, kv_len)
    m_i = tl.full([BLOCK_M], -1.0e30, dtype=tl.float32)  # finite: a fully masked row keeps l = 0, never NaN
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([LATENT, BLOCK_M], dtype=tl.float32)
    bt = bt_ptr + b * bt_stride
    # PEEL tiles are loaded before the loop, together, and computed in order; the loop's pipeline starts after
    # them. PEEL=0: every tile is the loop's, and the first tile has no stamps (taken in the loop, they cost
    # the stamped build 3-21% on an H100, against 1-4% for the rest)
    page = tl.load(bt + start // PAGE)
    if PEEL >= 1:
        if PEEL >= 2:
            page1 = tl.load(bt + tl.minimum(start + BLOCK_N, kv_len - 1) // PAGE)
            k1_n, k1_r = _load_tile(kv_ptr, bt, page1, start + BLOCK_N, stop, PAGE, BLOCK_N)
        k_n, k_r = _load_tile(kv_ptr, bt, page, start, stop, PAGE, BLOCK_N)
        nxt = tl.load(bt + tl.minimum(start + PEEL * BLOCK_N, kv_len - 1) // PAGE)
        m_i, l_i, acc = _scores(k_n, k_r, qt_n, qt_r, start, stop, limit, m_i, l_i, acc, scale_log2, BLOCK_N,
                                STAMPS, stamp_ptr, W, True)  # fmt: skip
        if PEEL >= 2:
            m_i, l_i, acc = _scores(k1_n, k1_r, qt_n, qt_r, start + BLOCK_N, stop, limit, m_i, l_i, acc, scale_log2,
                                    BLOCK_N, STAMPS, stamp_ptr, W, False)  # fmt: skip
    else:
        nxt = page
    for n0 in tl.range(start + PEEL * BLOCK_N, stop, BLOCK_N):
        page = nxt
        nxt = tl.load(bt + tl.minimum(n0 + BLOCK_N, kv_len - 1) // PAGE)  # a tile ahead
        k_n, k_r = _load_tile(kv_ptr, bt, page, n0, stop, PAGE, BLOCK_N)
        m_i, l_i, acc = _scores(k_n, k_r, qt_n, qt_r, n0, stop, limit, m_i, l_i, acc, scale_log2, BLOCK_N,
                                STAMPS, stamp_ptr, W, False)  # fmt: skip
    if STAMPS:
        _stamp(stamp_ptr, W, 3 - FIRST_COLS * (PEEL == 0), _dep(l_i))
    safe_l = tl.where(l_i > 0, l_i, 1.0)
    row_base = (b * ROWS_P + offs_m) * splits + split
    tl.store(part_o + row_base[None, :] * LATENT + tl.arange(0, LATENT)[:, None], acc / safe_l[None, :])
    tl.store(part_lse + row_base, tl.where(l_i > 0, m_i + tl.log2(safe_l), float("-inf")))
    tl.debug_barrier()
    if STAMPS:
        _stamp(stamp_ptr, W, 4 - FIRST_COLS * (PEEL == 0), split)
    if MERGE_INKERNEL:
        # last arriver merges: release our partials, acquire everyone else's
        arrived = tl.atomic_add(counter_ptr + b * mblocks + mb, 1, sem="acq_rel")
        if arrived == splits - 1:
            _merge(part_o, part_lse, out_ptr, b, mb * BLOCK_M, 0, splits, ROWS, ROWS_P, BLOCK_M, LATENT, MERGE_DC,
                   SPLITS_P2)  # fmt: skip
            tl.atomic_xchg(counter_ptr + b * mblocks + mb, 0)
        tl.debug_barrier()
    if STAMPS:
        _stamp(stamp_ptr, W, 5 - FIRST_COLS * (PEEL == 0), split)


@triton.jit
def split_mla_reduce(part_o, part_lse, out_ptr, stamp_ptr, splits, ROWS: tl.constexpr, ROWS_P: tl.constexpr,
           DB: tl.constexpr, SPLITS_P2: tl.constexpr, STAMPS: tl.constexpr, W: tl.constexpr, ROW0):  # fmt: skip
    """One program per (row, DB latent dims, request): the merge spread over many CTAs."""
    blk = tl.program_id(0)
    dblk = tl.program_id(1)
    b = tl.program_id(2)
    stamp_row = stamp_ptr + (ROW0 + (b * tl.num_programs(1) + dblk) * tl.num_programs(0) + blk) * W
    if STAMPS:
        tl.store(stamp_row + 0, _now(blk))
        tl.store(stamp_row + W - 1, _smid(blk).to(tl.int64))
    _merge(part_o, part_lse, out_ptr, b, blk, dblk * DB, splits, ROWS, ROWS_P, 1, DB, DB, SPLITS_P2)
    tl.debug_barrier()
    if STAMPS:
        tl.store(stamp_row + 1, _now(blk))


@triton.jit
def split_mla_empty(stamp_ptr):
    """The floor probe: a kernel that does nothing, launched with the split kernel's grid."""
    pass
