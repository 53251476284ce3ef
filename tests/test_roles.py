"""Kernel roles: every family the shipped rules cover, from real names; user rules first."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from traceattr.attribution.engine import RangeFilter, attribute
from traceattr.attribution.roles import RoleRules
from traceattr.core.errors import RulesError
from traceattr.trace.loader import load_trace

# (name as nsys shows it, role, family): real names from public traces and our H200 fixtures
NAMES = [
    ("void flashinfer::mla::hopper::BatchMLAPageAttentionHopperKernel<flashinfer::mla::hopper::HopperKernelTraits<(bool)1, (unsigned int)2, (unsigned int)512, (unsigned int)64, (unsigned int)64, (unsigned int)64, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int>, flashinfer::MLAParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int>>(T2)", "attention", "flashinfer-fa3"),
    ("void flashinfer::mla::BatchMLAPagedAttentionKernel<flashinfer::mla::KernelTraits<(bool)0, (unsigned int)2, (bool)1, (unsigned int)512, (unsigned int)64, (unsigned int)64, (unsigned int)64, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int>, flashinfer::MLAParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int>>(T2)", "attention", "flashinfer-fa2"),
    ("void legacy::sm90::decode::dense::flash_fwd_splitkv_mla_kernel<legacy::sm90::decode::dense::Traits<cutlass::bfloat16_t, 576>, legacy::sm90::decode::dense::SharedMemoryPlan>(DenseAttnDecodeParams)", "attention", "flashmla"),
    ("void legacy::smxx::decode::flash_fwd_mla_combine_kernel<cutlass::bfloat16_t, 512, 8, 64, 256>(DecodingParams)", "reduce", "flashmla"),
    ("void legacy::smxx::decode::get_mla_metadata_kernel(GetDecodingMetadataParams)", "schedule", "flashmla"),
    ("fmhaSm100fKernel_QkvBfloat16OBfloat16HQk576HV512PagedKvDenseP64VarSeqQ16Kv128PersistentSwapsAbForGen", "attention", "trtllm-gen"),
    ("fmhaSm100fKernel_QkvBfloat16OBfloat16HQk576HV512PagedKvDenseP32VarSeqQ16Kv128PersistentSwapsAbForGen", "attention", "trtllm-gen"),
    ("fmhaSm100fKernel_QkvBfloat16OBfloat16HQk576HV512PagedKvDenseP64VarSeqQ8Kv128PersistentSwapsAbForGen", "attention", "trtllm-gen"),
    ("fmhaSm100fKernel_QkvBfloat16OBfloat16HQk576HV512HVPerCta256PagedKvDenseP64MultiCtasKvVarSeqQ16Kv128StaticSwapsAbForGen", "attention", "trtllm-gen"),
    ("fmhaSm103aKernel_QkvBfloat16OBfloat16HQk576HV512PagedKvDenseP64MultiCtasKvVarSeqQ8Kv128StaticKeepsAbForGen", "attention", "trtllm-gen"),
    ("void tensorrt_llm::kernels::fmhaReductionKernel<__nv_bfloat16, (int)512>(KernelParams)", "reduce", "trtllm-gen"),
    ("kernel_cutlass_split_kv_kernel_mla_decode_fp16BlackwellMultiHeadLatentAttentionForwardFP16_object_at__tensorptrbf16gmemalign16o1", "attention", "cute-dsl"),
    ("kernel_cutlass_split_kv_kernel_mla_decode_fp8BlackwellMultiHeadLatentAttentionForwardFP8_object_at__tensorptrf8E4M3", "attention", "cute-dsl"),
    ("kernel_cutlass_reduction_kernel_mla_decode_fp16BlackwellMultiHeadLatentAttentionForwardFP16_object_at__tensor", "reduce", "cute-dsl"),
    ("kernel_cake_trtllm_mla_blackwell_0f3a9b21c4d5e6f70812", "attention", "cake"),
    ("kernel_cake_kimi_k3_mla_fp8_paged_attention_3b7e0c1d2a4f5e6d7c8b", "attention", "cake"),
    ("kernel_cake_kimi_k3_mla_fp8_paged_attention_9c450b8e82598779f1b2", "reduce", "cake"),
    ("kernel_cake_kimi_k3_mla_fp8_paged_attention_ab133c42d484f9421945", "reduce", "cake"),
    ("kernel_cake_kimi_k3_mla_fp8_paged_attention_9f53b9e3e16d64b967c6", "reduce", "cake"),
    ("kernel_cake_kimi_k3_mla_fp8_paged_attention_582ec28a9ab46c704912", "reduce", "cake"),
    ("kernel_cake_trtllm_mla_blackwell_d1a68c90cbc4aa0fcd6e", "reduce", "cake"),
    ("kernel_cake_trtllm_mla_blackwell_4de3d4bf2f8c5467bf29", "reduce", "cake"),
    ("void flashinfer::PersistentVariableLengthMergeStatesKernel<(unsigned int)8, (unsigned int)16, (unsigned int)8, (unsigned int)4, __nv_bfloat16, __nv_bfloat16, int>(T5 *, T6 *, T7 *, T8 *, float *, unsigned int, unsigned int *, unsigned int, unsigned int)", "reduce", "flashinfer-merge"),
    ("void flashinfer::MergeStatesKernel<(unsigned int)8, (unsigned int)16, (unsigned int)8, (unsigned int)4, half, half>(T5 *, float *, T6 *, float *, unsigned int, unsigned int)", "reduce", "flashinfer-merge"),
    ("void flashinfer::MergeStateInPlaceKernel<(unsigned int)8, (unsigned int)16, half>(T3 *, float *, T3 *, float *, unsigned int, unsigned int, unsigned char *)", "reduce", "flashinfer-merge"),
    ("void vllm::merge_attn_states_kernel<__nv_bfloat16, (unsigned int)128>(T1 *, float *, const T1 *, const float *, const T1 *, const float *, unsigned int, unsigned int, unsigned int)", "reduce", "vllm-merge"),
    ("_fwd_grouped_kernel_stage1", "attention", "sglang-triton"),
    ("_fwd_kernel_stage2", "reduce", "sglang-triton"),
    ("split_mla_split_kv", "attention", "split-mla"),
    ("split_mla_reduce", "reduce", "split-mla"),
    ("split_mla_empty", "other", None),  # the floor probe: a kernel of no call
    ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, (int)128, (int)64, (int)4, (bool)0, (bool)0, cutlass::bfloat16_t, Flash_kernel_traits<(int)128, (int)128, (int)64, (int)4, cutlass::bfloat16_t>>, (bool)1, (bool)0, (bool)0, (bool)0, (bool)1, (bool)1, (bool)0, (bool)0>(Flash_fwd_params)", "attention", "flash-attn"),
    ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<signed char>, std::array<char *, (unsigned long)1>>(int, T2, T3)", "copy", "torch-copy"),
    ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", "other", None),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)", "other", None),
]  # fmt: skip


def test_default_rules_cover_every_family() -> None:
    rules = RoleRules.default()
    names = [n for n, _, _ in NAMES]
    assert rules.classify_names(names) == [r for _, r, _ in NAMES]


def test_families_are_reported(exports: dict[str, Path]) -> None:
    att = attribute(load_trace(exports["h200_flashinfer_mla"]))
    fams = att.ops.filter(pl.col("role") == "attention")["family"].unique().sort().to_list()
    assert fams == ["flashinfer-fa2", "flashinfer-fa3"]


def test_memops_and_flush_range() -> None:
    rules = RoleRules.default()
    assert rules.classify_names(["[CUDA memcpy Host-to-Device]"], kind="memcpy") == ["copy"]
    assert rules.classify_names(["[CUDA memset]"], kind="memset", range_name="traceattr:flush") == ["flush"]
    assert rules.classify_names(["anything"], range_name="traceattr:flush:3") == ["flush"]
    assert rules.classify_names(["anything"], range_name="traceattr:flushing") == ["other"]
    assert rules.classify_names(["spin_kernel"], range_name="traceattr:hold") == ["flush"]  # the runner's GPU hold
    assert rules.classify_names(["spin_kernel"]) == ["other"]  # a spin of someone else's is not ours


def test_mangled_then_short_names_are_tried() -> None:
    rules = RoleRules.default()
    table = pl.DataFrame(
        {
            "name_key": [0, 1],
            "kind": pl.Series(["kernel", "kernel"], dtype=pl.Enum(["kernel", "memcpy", "memset", "graph"])),
            "name": ["Kernel", "Kernel"],  # CUTLASS: the demangled name says nothing
            "mangled_name": ["_ZN7cutlass13Kernel_mla_combineE", None],
            "short_name": [None, "flash_fwd_splitkv_mla_kernel"],
        }
    )
    out = rules.classify(
        pl.DataFrame(
            {"name_key": [0, 1], "range_id": [None, None]}, schema={"name_key": pl.Int64, "range_id": pl.Int64}
        ),
        table,
        pl.DataFrame({"range_id": [], "range_name": []}, schema={"range_id": pl.Int64, "range_name": pl.String}),
    )
    assert out["role"].cast(pl.String).to_list() == ["other", "attention"]


def test_user_rules_come_first(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text('[[rule]]\nrole = "schedule"\nfamily = "mine"\npattern = "nvjet_"\n', encoding="utf-8")
    rules = RoleRules.load(path)
    assert rules.classify_names(["nvjet_sm90_tst", "fmhaSm100fKernel_x"]) == ["schedule", "attention"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rule = 3", "expected one or more"),
        ('[[rule]]\nrole = "fast"\npattern = "x"', "role must be one of"),
        ('[[rule]]\nrole = "reduce"\npattern = "("', "invalid regular expression"),
        ('[[rule]]\nrole = "reduce"\npatern = "x"', "unknown keys"),
        ('[[rule]]\nrole = "reduce"', "needs at least one of"),
        ('[[rule]]\nrole = "reduce"\nkinds = ["gpu"]', "kinds must be"),
        ("[[rule]\n", "not valid TOML"),
    ],
)
def test_bad_rules_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RulesError, match=message) as err:
        RoleRules.load(path)
    assert str(path) in str(err.value)


FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<signed char>, std::array<char *, 1ul>>(int, T2, T3)"


@pytest.mark.parametrize("select", [{}, {"match": "backend="}, {"domain": "traceattr", "match": "fa3"}])
@pytest.mark.parametrize("mode", ["nsys", "innermost"])
def test_l2_flush_is_flush_whatever_the_selection(tmp_path: Path, select: dict[str, str], mode: str) -> None:
    """The runner's L2 flush (FillFunctor in a traceattr:flush range) stays `flush` when --match leaves that
    range out: a role belongs to the op. The same kernel outside any flush range is a `copy`."""
    from tests.synth.builder import TraceBuilder

    b = TraceBuilder()
    dom = b.domain("traceattr", tid=1)
    b.launch(tid=1, start=500, end=600, kernel=FILL, gpu_start=1_000, gpu_end=2_000)  # a zero_() of its own
    for i, t in enumerate((10_000, 50_000)):
        b.push_range(tid=1, start=t, end=t + 1_000, message="flush", domain=dom)
        b.launch(tid=1, start=t + 100, end=t + 200, kernel=FILL, gpu_start=t + 2_000, gpu_end=t + 12_000)
        b.push_range(tid=1, start=t + 2_000, end=t + 3_000, message=f"backend=fa3 shape=q8_ctx8k arm=A iter={i}",
                     domain=dom)  # fmt: skip
        b.launch(tid=1, start=t + 2_100, end=t + 2_200, kernel=NAMES[0][0], gpu_start=t + 13_000, gpu_end=t + 30_000)
    att = attribute(load_trace(b.write(tmp_path / "flush.sqlite")), mode=mode, rules=RoleRules.default(),
                    select=RangeFilter(**select))  # fmt: skip
    roles = att.ops.sort("start_ns").select("name", pl.col("role").cast(pl.String)).rows()
    assert [r for _, r in roles] == ["copy", "flush", "attention", "flush", "attention"]


def test_rule_grid_equals_rule_per_op(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rules decided once per (name, range conditions met) agree with rules evaluated per op, range rules
    with and without name patterns and kinds, ops with and without a range."""
    import traceattr.attribution.roles as roles

    text = "".join(
        f'[[rule]]\nrole = "{role}"\nfamily = "f{i}"\nrange = "{rng}"\n{extra}\n'
        for i, (role, rng, extra) in enumerate(
            [("reduce", "^a", 'pattern = "comb"'), ("schedule", "b$", ""), ("copy", "c", 'kinds = ["memset"]'),
             ("attention", "a", 'pattern = "^x"'), ("other", "z", ""), ("reduce", "^b", 'pattern = "k"')]
        )
    )  # fmt: skip
    path = tmp_path / "ranged.toml"
    path.write_text(text, encoding="utf-8")
    rules = RoleRules.load(path)  # with the built-in flush and hold range rules: 8 range rules
    names = pl.DataFrame(
        {
            "name_key": [0, 1, 2, 3, 4],
            "kind": pl.Series(["kernel", "kernel", "memset", "kernel", "memcpy"], dtype=pl.Enum(["kernel", "memcpy", "memset", "graph"])),
            "name": ["combine_k", "xk", "[CUDA memset]", "flash_fwd_kernel", None],
            "mangled_name": [None, None, None, "_Z5xkern", None],
            "short_name": [None, "kshort", None, None, None],
        }
    )  # fmt: skip
    ranges = pl.DataFrame({"range_id": [10, 11, 12, 13, 14], "range_name": ["ab", "cb", "a:flush", "zz", None]})
    ops = pl.DataFrame(
        {"name_key": [k for k in range(5) for _ in range(6)], "range_id": [10, 11, 12, 13, 14, None] * 5},
        schema={"name_key": pl.Int32, "range_id": pl.Int64},
    )
    monkeypatch.setattr(roles, "_GRID_BITS", 8)
    grid = rules.classify(ops, names, ranges)
    monkeypatch.setattr(roles, "_GRID_BITS", 0)
    per_op = rules.classify(ops, names, ranges)
    assert grid["role"].n_unique() > 3  # the rules do tell these ops apart
    assert_frame_equal(grid, per_op)


def test_shipped_rules_pass_the_checks_a_user_file_gets() -> None:
    # the built-in file skips its regex checks at load time (every process reads it): here they run
    from importlib import resources

    from traceattr.attribution.roles import _parse

    text = resources.files("traceattr.attribution").joinpath("kernel_roles.toml").read_text(encoding="utf-8")
    checked = _parse(text, "kernel_roles.toml (built in)")
    assert checked == list(RoleRules.default().rules)
    assert any(rule.pattern for rule in checked) and any(rule.range for rule in checked)
