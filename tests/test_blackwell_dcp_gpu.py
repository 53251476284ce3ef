"""On an H200: a cute-dsl DCP row runs flashinfer's own DCP path, and what that path computes is checked.

1. ``q8_ctx131k_h64_dcp8`` on ``cute-dsl`` (``TRACEATTR_SKIP_ARCH_CHECK=1``, as tests/test_blackwell_gpu.py):
   the first rank's call reaches flashinfer with ``enable_dcp=True``, ``cp_world=8``, ``cp_rank=0``, the
   rank-local ``seq_lens`` and ``causal_seqlens_kv_global`` = the whole context, and ends in flashinfer's own
   SM100 refusal — not a ``TypeError`` nor its DCP argument check, which it runs first and which accepts
   these arguments (called here on the same CUDA tensors).
2. The plumbing around the kernel, which no H200 can run: with a torch stand-in for
   ``trtllm_batch_decode_with_kv_cache_mla`` that computes a DCP rank the way flashinfer's docstring and
   mask say (local key k is position ``cp_world·k + cp_rank``, query token i of q keeps positions
   ``< G − q + 1 + i``), the N ranks' shards, calls and merge give the torch reference over the whole
   context; passing the rank-local length as the global bound is caught. The stand-in is a test double of
   flashinfer's documented semantics, not a claim about its kernel: that needs a B200.
"""

from __future__ import annotations

import json
import math
import os
import traceback
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

from traceattr.backends.arms import parse_arm  # noqa: E402
from traceattr.backends.base import SKIP_ARCH_CHECK_ENV  # noqa: E402
from traceattr.backends.dcp import FLASHINFER_DCP, DcpCall, DcpRank  # noqa: E402
from traceattr.core.shapes import LATENT_DIM, parse_shape  # noqa: E402

DCP8 = "q8_ctx131k_h64_dcp8"
CUTE_ARCH = r"^cute-dsl backend \(MLA decode kernel\) requires SM100\+, got SM90$"


def _flashinfer() -> Any:
    try:
        return pytest.importorskip("flashinfer")
    except Exception as exc:
        pytest.skip(f"flashinfer does not import here: {exc}")


@pytest.mark.usefixtures("hopper")
def test_cute_dsl_dcp8_reaches_flashinfers_sm100_refusal_through_its_dcp_path(monkeypatch: pytest.MonkeyPatch) -> None:
    flashinfer = _flashinfer()
    from traceattr.runner.loop import ShapeInputs, prepare_arm
    from traceattr.runner.plan import RunPlan

    real = flashinfer.mla.trtllm_batch_decode_with_kv_cache_mla
    seen: list[dict[str, Any]] = []

    def recording(**kwargs: Any) -> Any:
        seen.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(flashinfer.mla, "trtllm_batch_decode_with_kv_cache_mla", recording)
    row = parse_shape(DCP8)
    plan = RunPlan(shapes=(row.name,), arms=("cute-dsl",))
    with pytest.raises(ValueError, match=CUTE_ARCH) as info:
        prepare_arm(parse_arm("cute-dsl"), row, ShapeInputs(row, plan), plan.seed)
    innermost = traceback.extract_tb(info.value.__traceback__)[-1]
    assert f"{os.sep}flashinfer{os.sep}" in innermost.filename, innermost
    (kw,) = seen  # rank 0's call, the first of the eight; flashinfer refused it
    print({k: v for k, v in kw.items() if not isinstance(v, torch.Tensor)})
    assert (kw["backend"], kw["enable_dcp"], kw["cp_world"], kw["cp_rank"]) == ("cute-dsl", True, 8, 0)
    assert (kw["return_lse"], kw["return_lse_base"]) == (True, "base2")
    bound = kw["causal_seqlens_kv_global"]
    assert bound.is_cuda and bound.dtype == torch.int32 and bound.tolist() == [row.ctx]
    assert kw["seq_lens"].tolist() == [row.dcp_shards()[0]] == [kw["max_seq_len"]]
    from flashinfer.mla._core import _validate_mla_dcp_args

    accepted = _validate_mla_dcp_args(
        query=kw["query"], backend=kw["backend"], sinks=None, cum_seq_lens_q=kw.get("cum_seq_lens_q"),
        max_q_len=kw.get("max_q_len"), return_lse=kw["return_lse"], enable_dcp=kw["enable_dcp"],
        cp_world=kw["cp_world"], cp_rank=kw["cp_rank"], causal_seqlens_kv_global=bound,
    )  # fmt: skip
    assert accepted == "cute-dsl"


def torch_dcp_rank(**kw: Any) -> tuple[Any, Any]:
    """One DCP rank as flashinfer 0.7.2 documents ``trtllm_batch_decode_with_kv_cache_mla(enable_dcp=True)``."""
    assert kw["backend"] == "cute-dsl" and kw["enable_dcp"] and kw["return_lse"] and kw["return_lse_base"] == "base2"
    query, cache, out = kw["query"], kw["kv_cache"], kw["out"]
    lens, table, bound = kw["seq_lens"].tolist(), kw["block_tables"], kw["causal_seqlens_kv_global"].tolist()
    world, rank, page, heads = kw["cp_world"], kw["cp_rank"], cache.shape[1], query.shape[-2]
    indptr = kw["cum_seq_lens_q"].tolist() if "cum_seq_lens_q" in kw else None
    rows = query.reshape(-1, heads, query.shape[-1]).float()
    if indptr is None:
        indptr = [b * query.shape[1] for b in range(len(lens) + 1)]
    outs, lses = [], []
    for b, local in enumerate(lens):
        q = rows[indptr[b] : indptr[b + 1]] * kw["bmm1_scale"]
        s = q.shape[0]
        k = torch.arange(local, device=query.device)
        keys = cache[table[b, k // page].long(), k % page].float()
        keep = world * k[None, :] + rank < (bound[b] - s + 1 + torch.arange(s, device=query.device))[:, None]
        scores = torch.einsum("shd,kd->shk", q, keys).masked_fill(~keep[:, None, :], float("-inf"))
        lse = torch.logsumexp(scores, -1)
        weights = torch.exp(scores - lse[..., None]).nan_to_num(0.0)
        outs.append(torch.einsum("shk,kd->shd", weights, keys[:, :LATENT_DIM]) * kw["bmm2_scale"])
        lses.append(lse / math.log(2))
    out.copy_(torch.cat(outs).view(out.shape))
    return out, torch.cat(lses)


@pytest.mark.parametrize("row_name", ["q4_ctx1000_h16_b2_dcp4", "q3_ctx1001_h16_b3_ragged_dcp3"])
def test_the_ranks_merged_are_the_reference_over_the_whole_context(
    row_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    flashinfer = _flashinfer()
    from traceattr.runner.loop import ShapeInputs, check_output, prepare_arm
    from traceattr.runner.plan import RunPlan

    monkeypatch.setattr(flashinfer.mla, "trtllm_batch_decode_with_kv_cache_mla", torch_dcp_rank)
    row = parse_shape(row_name)
    plan = RunPlan(shapes=(row.name,), arms=("cute-dsl",))
    data = ShapeInputs(row, plan)
    arm = parse_arm("cute-dsl")
    call, inputs = prepare_arm(arm, row, data, plan.seed)
    assert isinstance(call, DcpCall) and call.path == FLASHINFER_DCP and call.whole is not None
    assert call.whole.shape.ctx == row.ctx and inputs is data.base  # the measured rank reads the row's inputs
    entry: dict[str, Any] = {}
    refusal = check_output(arm, row, call, inputs, data, plan, entry)
    print(row_name, entry)
    assert refusal is None, refusal
    assert entry["relative_error"] < 0.01 and entry["lse_abs_error"] < 0.01 and entry["merge_relative_error"] < 0.01

    # the check can fail: the rank-local length passed as the global causal bound masks most keys out
    monkeypatch.setattr(DcpRank, "global_lens", lambda self: (self.local_tokens,) * self.row.batch)
    call, inputs = prepare_arm(arm, row, data, plan.seed)
    refusal = check_output(arm, row, call, inputs, data, plan, {})
    assert refusal is not None and "differs from the torch reference" in refusal, refusal


def test_runner_json_says_the_dcp_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A cute-dsl DCP row through the whole runner (stand-in kernel): checked, timed, ``dcp_path`` recorded."""
    flashinfer = _flashinfer()
    from traceattr.runner.loop import main
    from traceattr.runner.plan import RunPlan

    monkeypatch.setattr(flashinfer.mla, "trtllm_batch_decode_with_kv_cache_mla", torch_dcp_rank)
    monkeypatch.setenv(SKIP_ARCH_CHECK_ENV, "1")  # the runner checks the arm's architecture first
    row = parse_shape("q2_ctx512_h16_dcp2")
    # no hold: the stand-in synchronizes, so a held group would wait out the hold's timeout
    plan = RunPlan(shapes=(row.name,), arms=("cute-dsl",), iters=2, warmup=1, capture_range=False, hold_us=0.0)
    (tmp_path / "plan.json").write_text(json.dumps(plan.to_json()), encoding="utf-8")
    main([str(tmp_path / "plan.json"), str(tmp_path)])
    runner = json.loads((tmp_path / plan.results).read_text(encoding="utf-8"))
    entry = runner["shapes"][row.name]["backends"]["cute-dsl"]
    print(entry)
    assert entry["status"] == "ok" and entry["dcp_path"] == "flashinfer dcp" and runner["timed"] is True
