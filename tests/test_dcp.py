"""A DCP row's plan on flashinfer's own DCP path (cute-dsl) and on the emulation, as data: no GPU, no torch.

What each rank's call is told — ``cp_world``, ``cp_rank``, its rank-local ``seq_lens``/``max_seq_len`` and
``causal_seqlens_kv_global`` — and that, read the way flashinfer 0.7.2's kernel reads them (its mask in
``cute_dsl/attention/monolithic/mla_decode_fp16.py``: local key k of rank r is global position
``cp_world·k + cp_rank``, kept for query token i of q iff ``i ≥ cp_world·k + cp_rank − G + q``), the N ranks
together attend to exactly the keys the torch reference masks in (row i sees positions ``< ctx − q + 1 + i``),
each key on one rank.
"""

from __future__ import annotations

import pytest

from traceattr.backends.arms import arm_backend, check_arm, parse_arm
from traceattr.backends.base import Device
from traceattr.backends.dcp import CONTIGUOUS_SHARDS, EMULATED, FLASHINFER_DCP, DcpRank, dcp_path
from traceattr.backends.flashinfer_trtllm import CUTE_DSL, TrtllmDecode
from traceattr.core.errors import BackendUnsupported
from traceattr.core.shapes import parse_shape
from traceattr.jobs.rank_runs import make_ranks_plan

B200 = Device("NVIDIA B200", (10, 0), 148)
SEEDS_ROW = "q8_ctx125k_h96_dcp8"  # the seeds' TP1+DCP8 row
ROWS = (SEEDS_ROW, "q8_ctx131k_h64_dcp8", "q4_ctx4100_h16_b3_ragged_dcp4", "q2_ctx1001_h16_dcp3", "q1_ctx64_dcp2")


def kernel_keeps(rank: DcpRank, scalars: dict[str, object], global_len: int, q_len: int, i: int) -> set[int]:
    """Global positions rank *rank*'s call attends to for query token *i*, by flashinfer's mask on its arguments."""
    world, r, local = scalars["cp_world"], scalars["cp_rank"], scalars["max_seq_len"]
    assert isinstance(world, int) and isinstance(r, int) and isinstance(local, int)
    return {world * k + r for k in range(local) if i >= world * k + r - global_len + q_len}


@pytest.mark.parametrize("row_name", ROWS)
def test_ranks_hold_the_context_cyclically_and_count_as_dcp_shards(row_name: str) -> None:
    row = parse_shape(row_name)
    ranks = [DcpRank(row, r) for r in range(row.dcp)]
    assert [rank.local_tokens for rank in ranks] == row.dcp_shards()
    held = sorted(p for rank in ranks for p in rank.positions())
    assert held == list(range(row.ctx))  # every position on exactly one rank
    assert all(p % row.dcp == rank.rank for rank in ranks for p in rank.positions())
    # the measured (last) rank's shard is the row's shared inputs: what every emulated arm reads too
    assert ranks[-1].shape() == parse_arm("cute-dsl").call_shape(row) == row.rank_share()
    assert all(rank.global_lens() == (row.ctx,) * row.batch for rank in ranks)


@pytest.mark.parametrize("row_name", ROWS)
def test_each_rank_call_says_its_rank_world_and_the_global_causal_bound(row_name: str) -> None:
    row = parse_shape(row_name)
    backend = TrtllmDecode(CUTE_DSL)
    for r in range(row.dcp):
        rank = DcpRank(row, r)
        plan = backend.dcp_plan(rank.shape(), rank)
        assert plan.scalars["enable_dcp"] is True
        assert (plan.scalars["cp_world"], plan.scalars["cp_rank"]) == (row.dcp, r)
        assert plan.scalars["max_seq_len"] == row.dcp_shards()[r]  # rank-local, as flashinfer's doc asks
        assert plan.tensors["seq_lens"].shape == plan.tensors["causal_seqlens_kv_global"].shape == (row.batch,)
        assert plan.tensors["causal_seqlens_kv_global"].dtype == "int32"
        assert plan.shape.ctx == rank.local_tokens and plan.shape.dcp == 1
        if row.pattern == "ragged":  # compact queries: flashinfer's DCP takes cum_seq_lens_q with [total_q, H, 576]
            assert plan.tensors["query"].shape == (sum(row.q_lens()), row.heads, 576)
            assert "cum_seq_lens_q" in plan.tensors
        kwargs = backend.call_kwargs(plan, dict.fromkeys(plan.tensors), lse=True)
        assert (kwargs["return_lse"], kwargs["return_lse_base"]) == (True, "base2")  # merge_states's base


@pytest.mark.parametrize(
    "row_name", ["q8_ctx64_dcp8", "q4_ctx1001_h16_b3_ragged_dcp4", "q2_ctx99_dcp3", "q1_ctx64_dcp2"]
)
def test_the_ranks_together_see_exactly_the_references_keys(row_name: str) -> None:
    row = parse_shape(row_name)
    backend = TrtllmDecode(CUTE_DSL)
    plans = [(DcpRank(row, r), backend.dcp_plan(DcpRank(row, r).shape(), DcpRank(row, r))) for r in range(row.dcp)]
    for b, q_len in enumerate(row.q_lens()):
        for i in range(q_len):
            seen = [kernel_keeps(rank, dict(p.scalars), rank.global_lens()[b], q_len, i) for rank, p in plans]
            assert sum(map(len, seen)) == len(set().union(*seen))  # no key twice
            assert set().union(*seen) == set(range(row.ctx - q_len + 1 + i)), (b, i)


def test_the_rank_local_length_as_global_bound_would_lose_keys() -> None:
    """The check above can fail: passing the rank-local length as the global bound masks most keys out."""
    row = parse_shape("q2_ctx99_dcp3")
    rank = DcpRank(row, 0)
    plan = TrtllmDecode(CUTE_DSL).dcp_plan(rank.shape(), rank)
    wrong = kernel_keeps(rank, dict(plan.scalars), rank.local_tokens, 2, 1)
    assert wrong != set(rank.positions()) and len(wrong) < rank.local_tokens // 2


def test_dcp_plan_refusals() -> None:
    row = parse_shape("q8_ctx131075_h64_dcp8")
    with pytest.raises(ValueError, match="not rank 0's shard"):
        TrtllmDecode(CUTE_DSL).dcp_plan(row.rank_share(), DcpRank(row, 0))  # rank 7's shard is one token shorter
    with pytest.raises(BackendUnsupported, match="cute-dsl's only"):
        arm_backend(parse_arm("cake")).dcp_plan(row.rank_share(), DcpRank(row, 7))  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="not a rank"):
        DcpRank(row, 8)
    with pytest.raises(ValueError, match="not a rank"):
        DcpRank(row.with_(dcp=1), 0)


def test_which_path_each_backend_takes() -> None:
    paths = {name: dcp_path(arm_backend(parse_arm(name))) for name in ("cute-dsl", "cake", "fa3", "flashmla")}
    assert paths == {"cute-dsl": FLASHINFER_DCP, "cake": EMULATED, "fa3": EMULATED, "flashmla": EMULATED}
    # trtllm-gen never gets that far: the seeds' reason refuses its DCP rows
    with pytest.raises(BackendUnsupported, match="DCP: cute-dsl only — trtllm's decode kernel doesn't implement DCP"):
        check_arm(parse_arm("trtllm-gen"), parse_shape(SEEDS_ROW), B200, packages=False)
    plan = check_arm(parse_arm("cute-dsl[kv=fp8]"), parse_shape(SEEDS_ROW), B200, packages=False)
    assert plan.shape == parse_shape(SEEDS_ROW).with_(kv_dtype="fp8").rank_share()


def test_ranks_runs_say_their_path() -> None:
    cute = make_ranks_plan(parse_shape("q8_ctx131k_h64_dcp8"), 8, "cute-dsl")
    fa3 = make_ranks_plan(parse_shape("q8_ctx1m_dcp2"), 2, "fa3")
    assert (cute.dcp_path(), fa3.dcp_path()) == (FLASHINFER_DCP, CONTIGUOUS_SHARDS)
    text = cute.describe()
    assert "(cute-dsl, flashinfer dcp)" in text and "rank 7: 16,375 tokens × 1 (positions 7, 15, 23, …)" in text
    assert "(fa3, contiguous shards)" in fa3.describe() and "(one span)" in fa3.describe()
