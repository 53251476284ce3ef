"""Backend plans and eligibility, checked without a GPU: arguments as data, reasons with values."""

from __future__ import annotations

import pytest

from traceattr.backends import BACKENDS, check
from traceattr.backends.base import SM_SCALE, Device
from traceattr.backends.layout import KvLayout
from traceattr.core.errors import BackendUnsupported, TraceattrError
from traceattr.core.shapes import parse_shape

H200 = Device("NVIDIA H200", (9, 0), 132)
B200 = Device("NVIDIA B200", (10, 0), 148)
B300 = Device("NVIDIA B300", (10, 3), 148)


def plan(name: str, shape: str, device: Device = H200):
    return check(name, parse_shape(shape), device, packages=False)


def test_hopper_runs_fa2_fa3_flashmla_and_says_why_not_blackwell() -> None:
    for name in ("fa3", "fa2", "flashmla", "fa3-per-token"):
        plan(name, "q8_ctx900k")
    for name in ("trtllm-gen", "cute-dsl", "cake"):
        with pytest.raises(BackendUnsupported, match=r"needs sm_100.*this GPU \(NVIDIA H200\) is sm_90"):
            plan(name, "q8_ctx900k")


def test_blackwell_rules() -> None:
    plan("trtllm-gen", "q8_ctx900k", B200)
    plan("cute-dsl", "q8_ctx900k_h96", B300)
    with pytest.raises(BackendUnsupported, match=r"96 heads not supported \(64 < H < 128"):
        plan("trtllm-gen", "q8_ctx900k_h96", B200)
    with pytest.raises(BackendUnsupported, match=r"page size 16 not supported \(supports 32, 64\)"):
        plan("trtllm-gen", "q8_ctx900k_p16", B200)
    with pytest.raises(BackendUnsupported, match=r"16 heads with bf16 KV not supported \(only H in \[64, 128\]\)"):
        plan("cake", "q8_ctx900k", B200)
    plan("cake", "q8_ctx900k_h128", B200)
    plan("cake", "q8_ctx900k_fp8", B300)
    with pytest.raises(BackendUnsupported, match="needs sm_90"):
        plan("fa3", "q8_ctx900k", B200)
    with pytest.raises(BackendUnsupported, match="fp8 KV needs sm_90, this GPU is sm_100"):
        plan("fa2", "q8_ctx900k_fp8", B200)


def test_wrapper_plan_uses_the_current_api_arguments() -> None:
    p = plan("fa3", "q8_ctx900k_h16_b2")
    pages = KvLayout(parse_shape("q8_ctx900k_b2")).num_pages
    assert p.tensors["query"].shape == (16, 16, 576) and p.tensors["query"].dtype == "bfloat16"
    assert p.tensors["kv_cache"].shape == (pages, 64, 576)
    assert p.tensors["qo_indptr"].shape == (3,) and p.tensors["kv_len_arr"].shape == (2,)
    assert p.tensors["kv_indices"].shape == (pages,)
    assert p.scalars | {} == {
        "backend": "fa3", "num_heads": 16, "head_dim_ckv": 512, "head_dim_kpe": 64, "page_size": 64,
        "causal": True, "sm_scale": SM_SCALE, "q_data_type": "bfloat16", "kv_data_type": "bfloat16",
    }  # fmt: skip
    assert plan("fa3", "q1_ctx900k").scalars["causal"] is False
    assert plan("fa3", "q8_ctx900k_fp8").tensors["kv_cache"].dtype == "float8_e4m3fn"


def test_per_token_variant_unfolds_verify_tokens() -> None:
    p = plan("fa3-per-token", "q8_ctx1000_b2")
    assert p.tensors["qo_indptr"].shape == (17,) and p.scalars["causal"] is False
    req = KvLayout(parse_shape("q8_ctx1000_b2")).row_requests()
    assert req.kv_lens[:8] == (993, 994, 995, 996, 997, 998, 999, 1000)
    assert req.pages[0] == KvLayout(parse_shape("q8_ctx1000_b2")).owned[0][: -(-993 // 64)]


def test_flashmla_plan() -> None:
    p = plan("flashmla", "q8_ctx900k_h128_b2")
    assert p.tensors["q"].shape == (2, 8, 128, 576)
    assert p.tensors["k_cache"].shape[1:] == (64, 1, 576)
    assert p.tensors["block_table"].shape == (2, 14063)
    assert p.scalars == {"head_dim_v": 512, "softmax_scale": SM_SCALE, "causal": True, "use_legacy": True}
    with pytest.raises(BackendUnsupported, match=r"page size 32 not supported \(supports 64\)"):
        plan("flashmla", "q8_ctx900k_p32")


def test_trtllm_plan_shapes_and_alignment() -> None:
    uniform = plan("cute-dsl", "q8_ctx1000_p32", B200)
    assert uniform.tensors["query"].shape == (1, 8, 16, 576)
    assert uniform.tensors["block_tables"].shape == (1, 32)  # 32 pages, already a multiple of 128 // 32
    assert plan("cute-dsl", "q8_ctx1000_p64", B200).tensors["block_tables"].shape == (1, 16)
    assert plan("cute-dsl", "q8_ctx900_p64", B200).tensors["block_tables"].shape == (1, 16)  # 15 → 16
    assert plan("trtllm-gen", "q8_ctx900_p64", B200).tensors["block_tables"].shape == (1, 15)  # no alignment
    ragged = plan("trtllm-gen", "q4_ctx1000_b3_ragged", B200)
    assert ragged.tensors["query"].shape == (1 + 2 + 4, 16, 576) and ragged.scalars["max_q_len"] == 4
    assert ragged.tensors["cum_seq_lens_q"].shape == (4,)
    fp8 = plan("trtllm-gen", "q8_ctx1000_fp8", B200)
    assert fp8.tensors["query"].dtype == "float8_e4m3fn" and fp8.tensors["out"].dtype == "bfloat16"
    assert {k: fp8.scalars[k] for k in ("qk_nope_head_dim", "kv_lora_rank", "qk_rope_head_dim")} == {
        "qk_nope_head_dim": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
    }  # fmt: skip


def test_shuffled_pages_are_a_permutation() -> None:
    layout = KvLayout(parse_shape("q1_ctx10k_b3"), shuffle=True, seed=7)
    flat = [p for pages in layout.owned for p in pages]
    assert sorted(flat) == list(range(layout.num_pages)) and flat != sorted(flat)
    assert KvLayout(parse_shape("q1_ctx10k_b3"), shuffle=True, seed=7).owned == layout.owned


def test_registry() -> None:
    assert set(BACKENDS) == {"fa3", "fa2", "fa3-per-token", "flashmla", "trtllm-gen", "cute-dsl", "cake"}
    with pytest.raises(TraceattrError, match=r"unknown backend .xformers.; known: fa3, fa2"):
        check("xformers", parse_shape("q1_ctx1k"), H200)


def test_missing_packages_are_named() -> None:
    import importlib.util

    if importlib.util.find_spec("flashinfer") is not None:
        pytest.skip("flashinfer is installed here")
    with pytest.raises(BackendUnsupported, match="needs the Python package"):
        check("fa3", parse_shape("q1_ctx1k"), H200)
