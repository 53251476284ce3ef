"""Triton kernels of the split-KV MLA decode, with optional phase stamps.

``split_kv``: one program per (KV split, block of 16 query rows, request). It loads
its Q rows, runs the first KV tile on its own (so "first tile loaded" and "first
MMA" are stamp points in the plain kernel too), then the rest of its split with an
online softmax, and stores the partial output (fp32) and its base-2 LSE. With
``MERGE_INKERNEL`` the program then increments the row block's counter; the last
one to arrive merges all splits of the block and resets the counter (so a CUDA-graph
replay finds it at zero). Otherwise ``reduce`` merges them in a second launch.

Stamps (``STAMPS``): ``%globaltimer`` (GPU nanoseconds, the clock CUPTI stamps
kernels with) read through inline PTX, one row per program, columns in the order of
``SPLIT_BOUNDARIES`` / ``REDUCE_BOUNDARIES`` and the SM id last (docs/phases.md has the
layout). A stamp "after" a load takes a reduction of the loaded values as an operand,
so it cannot be issued before the data arrived; a stamp after stores follows a CTA
barrier. Without ``STAMPS`` none of this is compiled in: the plain kernel.
"""

from __future__ import annotations

import triton
import triton.language as tl

SPLIT_BOUNDARIES = ("begin", "tile_loaded", "first_mma", "loop_done", "stored", "merged")
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
def _tile(q_n, q_r, kv_ptr, bt_ptr, b, bt_stride, n0, stop, limit, m_i, l_i, acc, scale_log2,
          PAGE: tl.constexpr, BLOCK_N: tl.constexpr, STAMPS: tl.constexpr, stamp_row, FIRST: tl.constexpr):  # fmt: skip
    offs_n = n0 + tl.arange(0, BLOCK_N)
    n_mask = offs_n < stop
    page = tl.load(bt_ptr + b * bt_stride + offs_n // PAGE, mask=n_mask, other=0)
    row = page.to(tl.int64) * PAGE + offs_n % PAGE
    offs_d = tl.arange(0, LATENT)
    offs_r = tl.arange(0, ROPE)
    k_n = tl.load(kv_ptr + row[:, None] * DIM + offs_d[None, :], mask=n_mask[:, None], other=0.0)
    k_r = tl.load(kv_ptr + row[:, None] * DIM + LATENT + offs_r[None, :], mask=n_mask[:, None], other=0.0)
    if STAMPS and FIRST:
        tl.store(stamp_row + 1, _now(_dep(k_r) + _dep(k_n)))
    qk = tl.dot(q_n, tl.trans(k_n)) + tl.dot(q_r, tl.trans(k_r))
    qk = qk * scale_log2
    keep = n_mask[None, :] & (offs_n[None, :] < limit[:, None])
    qk = tl.where(keep, qk, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(qk, 1))
    if STAMPS and FIRST:
        tl.store(stamp_row + 2, _now(tl.max(m_new).to(tl.int32)))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(qk - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), k_n)
    return m_new, l_i, acc


@triton.jit
def _merge(part_o, part_lse, out_ptr, b, row0, splits, ROWS, ROWS_P,
           RB: tl.constexpr, SPLITS_P2: tl.constexpr, STAMPS: tl.constexpr, stamp_row, LOADED_COL: tl.constexpr):  # fmt: skip
    """Merge the splits of rows row0 … row0+RB of request b into out (bf16)."""
    offs_m = row0 + tl.arange(0, RB)
    offs_s = tl.arange(0, SPLITS_P2)
    offs_d = tl.arange(0, LATENT)
    base = (b * ROWS_P + offs_m) * splits
    lse = tl.load(part_lse + base[:, None] + offs_s[None, :], mask=offs_s[None, :] < splits,
                  other=float("-inf"), cache_modifier=".cg")  # fmt: skip
    g_max = tl.max(lse, 1)
    total = tl.sum(tl.exp2(lse - g_max[:, None]), 1)
    if STAMPS and LOADED_COL > 0:
        tl.store(stamp_row + LOADED_COL, _now(_dep(total)))
    acc = tl.zeros([RB, LATENT], dtype=tl.float32)
    for s in range(0, splits):
        w = tl.exp2(tl.load(part_lse + base + s, cache_modifier=".cg") - g_max) / total
        o = tl.load(part_o + (base[:, None] + s) * LATENT + offs_d[None, :], cache_modifier=".cg")
        acc += w[:, None] * o
    rows_ok = offs_m < ROWS
    tl.store(out_ptr + (b * ROWS + offs_m)[:, None] * LATENT + offs_d[None, :], acc.to(tl.bfloat16),
             mask=rows_ok[:, None])  # fmt: skip


@triton.jit
def split_kv(q_ptr, kv_ptr, bt_ptr, part_o, part_lse, out_ptr, counter_ptr, stamp_ptr,
             kv_len, chunk, bt_stride, scale_log2,
             ROWS: tl.constexpr, S: tl.constexpr, H: tl.constexpr, PAGE: tl.constexpr,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SPLITS_P2: tl.constexpr,
             MERGE_INKERNEL: tl.constexpr, STAMPS: tl.constexpr, W: tl.constexpr):  # fmt: skip
    split = tl.program_id(0)
    mb = tl.program_id(1)
    b = tl.program_id(2)
    splits = tl.num_programs(0)
    mblocks = tl.num_programs(1)
    stamp_row = stamp_ptr + ((b * mblocks + mb) * splits + split) * W
    if STAMPS:
        tl.store(stamp_row + 0, _now(split))
        tl.store(stamp_row + W - 1, _smid(split).to(tl.int64))
    ROWS_P = mblocks * BLOCK_M
    offs_m = mb * BLOCK_M + tl.arange(0, BLOCK_M)
    m_ok = offs_m < ROWS
    q_base = q_ptr + (b * ROWS + offs_m)[:, None] * DIM
    q_n = tl.load(q_base + tl.arange(0, LATENT)[None, :], mask=m_ok[:, None], other=0.0)
    q_r = tl.load(q_base + LATENT + tl.arange(0, ROPE)[None, :], mask=m_ok[:, None], other=0.0)
    limit = kv_len - S + 1 + offs_m // H  # row m is verify token m // H: the causal tail
    start = split * chunk
    stop = tl.minimum(start + chunk, kv_len)
    m_i = tl.full([BLOCK_M], -1.0e30, dtype=tl.float32)  # finite: a fully masked row keeps l = 0, never NaN
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, LATENT], dtype=tl.float32)
    m_i, l_i, acc = _tile(q_n, q_r, kv_ptr, bt_ptr, b, bt_stride, start, stop, limit, m_i, l_i, acc, scale_log2,
                          PAGE, BLOCK_N, STAMPS, stamp_row, True)  # fmt: skip
    for n0 in range(start + BLOCK_N, stop, BLOCK_N):
        m_i, l_i, acc = _tile(q_n, q_r, kv_ptr, bt_ptr, b, bt_stride, n0, stop, limit, m_i, l_i, acc, scale_log2,
                              PAGE, BLOCK_N, STAMPS, stamp_row, False)  # fmt: skip
    if STAMPS:
        tl.store(stamp_row + 3, _now(_dep(l_i)))
    safe_l = tl.where(l_i > 0, l_i, 1.0)
    row_base = (b * ROWS_P + offs_m) * splits + split
    tl.store(part_o + row_base[:, None] * LATENT + tl.arange(0, LATENT)[None, :], acc / safe_l[:, None])
    tl.store(part_lse + row_base, tl.where(l_i > 0, m_i + tl.log2(safe_l), float("-inf")))
    tl.debug_barrier()
    if STAMPS:
        tl.store(stamp_row + 4, _now(split))
    if MERGE_INKERNEL:
        # last arriver merges: release our partials, acquire everyone else's
        arrived = tl.atomic_add(counter_ptr + b * mblocks + mb, 1, sem="acq_rel")
        if arrived == splits - 1:
            _merge(part_o, part_lse, out_ptr, b, mb * BLOCK_M, splits, ROWS, ROWS_P, BLOCK_M, SPLITS_P2,
                   False, stamp_row, 0)  # fmt: skip
            tl.atomic_xchg(counter_ptr + b * mblocks + mb, 0)
        tl.debug_barrier()
    if STAMPS:
        tl.store(stamp_row + 5, _now(split))


@triton.jit
def reduce(part_o, part_lse, out_ptr, stamp_ptr, splits, ROWS: tl.constexpr, ROWS_P: tl.constexpr,
           RB: tl.constexpr, SPLITS_P2: tl.constexpr, STAMPS: tl.constexpr, W: tl.constexpr, ROW0):  # fmt: skip
    blk = tl.program_id(0)
    b = tl.program_id(1)
    stamp_row = stamp_ptr + (ROW0 + b * tl.num_programs(0) + blk) * W
    if STAMPS:
        tl.store(stamp_row + 0, _now(blk))
        tl.store(stamp_row + W - 1, _smid(blk).to(tl.int64))
    _merge(part_o, part_lse, out_ptr, b, blk * RB, splits, ROWS, ROWS_P, RB, SPLITS_P2, False, stamp_row, 0)
    tl.debug_barrier()
    if STAMPS:
        tl.store(stamp_row + 1, _now(blk))


@triton.jit
def empty(stamp_ptr):
    """The floor probe: a kernel that does nothing, launched with the split kernel's grid."""
    pass
