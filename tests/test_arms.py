"""Arms without a GPU: the grammar, validation per backend, plug-ins (spec and entry point), the plan
and the runner's call order; the example plug-in in examples/mla_plugin."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

from traceattr.backends import BACKENDS, registry
from traceattr.backends.arms import Arm, check_arm, default_arms, parse_arm, parse_arms
from traceattr.backends.base import Device
from traceattr.backends.layout import KvLayout
from traceattr.core.errors import BackendUnsupported, TraceattrError
from traceattr.core.shapes import parse_shape
from traceattr.jobs.profile import make_plan
from traceattr.runner.plan import (
    DEFAULT_MAX_ITERS,
    NOISE_STEP,
    RunPlan,
    between_arm,
    call_order,
    check_timing,
    more_iterations,
)

H200 = Device("NVIDIA H200", (9, 0), 132, 141 << 30, "13.0", 60 << 20)
B200 = Device("NVIDIA B200", (10, 0), 148, 180 << 30, "13.0", 126 << 20)
PLUGIN_ROOT = Path(__file__).parent.parent / "examples" / "mla_plugin"
PLUGIN = "mla_plugin.torch_mla:TorchMLA"


@pytest.fixture
def plugin_path(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(PLUGIN_ROOT))
    return PLUGIN_ROOT


@pytest.mark.parametrize(
    ("text", "label", "backend", "options", "program"),
    [
        ("fa3", "fa3", "fa3", (), "fa3"),
        ("fa3[splits=4]", "fa3[splits=4]", "fa3", (("splits", 4),), "fa3[splits=4]"),
        ("fa3[graphs]", "fa3[graphs]", "fa3", (("graphs", True),), "fa3"),  # same program as fa3
        ("flashmla[page=64]", "flashmla[page=64]", "flashmla", (("page", 64),), "flashmla[page=64]"),
        ("s4=fa3[splits=4,graphs]", "s4", "fa3", (("graphs", True), ("splits", 4)), "fa3[splits=4]"),
        ("fa2[kv=fp8]", "fa2[kv=fp8]", "fa2", (("kv", "fp8"),), "fa2[kv=fp8]"),
    ],
)
def test_parse_arm(text: str, label: str, backend: str, options: tuple, program: str) -> None:
    arm = parse_arm(text)
    assert (arm.label, arm.backend, arm.options, arm.program) == (label, backend, options, program)
    assert parse_arm(arm.text) == arm
    assert not any(c.isspace() for c in arm.label)


def test_options_are_canonical() -> None:
    assert parse_arm("fa3[splits=4,graphs]") == parse_arm("fa3[graphs,splits=4]")
    assert parse_arm("fa3[splits=4,graphs]").label == "fa3[graphs,splits=4]"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            "flashmla[splits=4]",
            "flashmla has no option 'splits' (its options: graphs, page, kv); splits is an option of fa3, fa2",
        ),
        ("fa3[splits=0]", "splits must be an integer ≥ 1, got '0'"),
        ("fa3[splits]", "splits needs a value (splits=1)"),
        ("fa3[graphs=1]", "graphs is a flag"),
        ("fa3[kv=fp4]", "kv must be one of bf16, fp8"),
        ("fa3[splits=2,splits=4]", "option splits given twice"),
        ("fa3 [splits=2]", "contains whitespace"),
        ("a b=fa3", "contains whitespace"),
        ("", "empty"),
        ("x=y=z", "expected [label=]backend"),
        ("a/b=fa3", "label 'a/b' may hold only"),
        ("xformers", "unknown backend 'xformers'; known: fa3"),
        ("nosuchpkg.mod:Cls", "cannot import nosuchpkg.mod: ModuleNotFoundError"),
        ("traceattr.core.shapes:Nope", "module traceattr.core.shapes has no attribute 'Nope'"),
        ("traceattr.core.shapes:Shape", "Shape() failed"),
        ("traceattr.core.shapes:HEAD_PRESETS", "not a traceattr backend: its caps must be"),
    ],
)
def test_bad_arms_say_why_in_one_line(text: str, needle: str) -> None:
    with pytest.raises(TraceattrError) as err:
        parse_arm(text)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_labels_must_differ() -> None:
    with pytest.raises(TraceattrError, match=r"label 'fa3' given twice; label them apart, e\.g\. a=fa3 b=fa3"):
        parse_arms(["fa3", "fa3"])
    assert [a.label for a in parse_arms(["a=fa3", "b=fa3"])] == ["a", "b"]


def test_default_arms_come_from_the_registry() -> None:
    # the built-ins first, then whatever installed packages register (examples/split_mla, once installed as
    # docs/phases.md says, is one): the test holds on a machine with plug-ins too
    assert [a.label for a in default_arms()] == list(registry())
    assert list(registry())[: len(BACKENDS)] == list(BACKENDS)
    assert all(a.options == () and a.program == a.backend for a in default_arms())


def test_check_arm_per_shape() -> None:
    q8 = parse_shape("q8_ctx900k")
    notes = check_arm(parse_arm("fa3[splits=4]"), q8, H200, packages=False).notes
    assert notes == ("KV split into 4 chunks per request: 2 attention launch(es) (non-causal, causal) + merge_states",)
    one = check_arm(parse_arm("fa3[splits=4]"), parse_shape("q1_ctx900k"), H200, packages=False)
    assert "1 attention launch(es) (non-causal)" in one.notes[0]
    assert one.tensors["partials"].shape == (4, 1, 16, 512)
    # options that change the data change the shape the backend sees, so its capabilities decide
    with pytest.raises(BackendUnsupported, match=r"^flashmla\[page=32\]: page size 32 not supported \(supports 64\)"):
        check_arm(parse_arm("flashmla[page=32]"), q8, H200, packages=False)
    with pytest.raises(BackendUnsupported, match="KV dtype fp8 not supported"):
        check_arm(parse_arm("flashmla[kv=fp8]"), q8, H200, packages=False)
    assert check_arm(parse_arm("fa3[page=32]"), q8, H200, packages=False).scalars["page_size"] == 32
    with pytest.raises(BackendUnsupported, match="splits=8 needs at least 8 KV pages per request, one has 5"):
        check_arm(parse_arm("fa3[splits=8]"), parse_shape("q8_ctx300"), H200, packages=False)
    with pytest.raises(BackendUnsupported, match="needs sm_10"):
        check_arm(parse_arm("cute-dsl"), q8, H200, packages=False)


def test_dcp_rows_run_the_rank_share_and_need_an_lse() -> None:
    dcp = parse_shape("q8_ctx900k_dcp8")
    plan = check_arm(parse_arm("fa3"), dcp, H200, packages=False)
    assert plan.shape == parse_shape("q8_ctx112500") and plan.tensors["kv_indices"].shape == (1758,)
    # trtllm-gen could return an LSE, but the seeds' tables refuse it DCP (flashinfer's enable_dcp is cute-dsl only)
    with pytest.raises(BackendUnsupported, match="DCP: cute-dsl only — trtllm's decode kernel doesn't implement DCP"):
        check_arm(parse_arm("trtllm-gen"), dcp, B200, packages=False)
    assert check_arm(parse_arm("cute-dsl"), dcp, B200, packages=False).shape == parse_shape("q8_ctx112500")
    assert check_arm(parse_arm("flashmla"), dcp, H200, packages=False).shape == parse_shape("q8_ctx112500")
    assert parse_arm("fa3[page=32]").call_shape(dcp) == parse_shape("q8_ctx112500_p32")


def test_kv_chunks_are_page_aligned_and_cover_the_request() -> None:
    req = KvLayout(parse_shape("q8_ctx1000_p64_b2"), shuffle=True, seed=1).requests()  # 16 pages, 1000 tokens
    chunks = req.chunks(3)
    assert [c.kv_lens for c in chunks] == [(320, 320), (320, 320), (360, 360)]
    for b in range(2):
        assert sum((c.pages[b] for c in chunks), ()) == req.pages[b]  # every page once, in order
    assert all(c.q_lens == req.q_lens for c in chunks)
    with pytest.raises(BackendUnsupported, match="last chunk"):
        KvLayout(parse_shape("q8_ctx129_p64")).requests().chunks(3)  # the last chunk is one 1-token page


def test_plugin_by_spec(plugin_path: Path) -> None:
    arm = parse_arm(f"cand={PLUGIN}")
    assert (arm.label, arm.backend, arm.program) == ("cand", PLUGIN, PLUGIN)
    plan = check_arm(arm, parse_shape("q8_ctx64k_b2"), H200, packages=False)
    assert plan.backend == "torch-mla" and plan.tensors["token_rows"].shape == (128_000,)
    assert check_arm(parse_arm(f"{PLUGIN}[graphs]"), parse_shape("q4_ctx64k_dcp4"), H200, packages=False)
    with pytest.raises(TraceattrError, match=r"TorchMLA has no option 'splits' .its options: graphs, page, kv."):
        parse_arm(f"cand={PLUGIN}[splits=2]")
    with pytest.raises(BackendUnsupported, match="^cand: KV dtype fp8 not supported"):  # noqa: RUF043
        check_arm(arm, parse_shape("q8_ctx64k_fp8"), H200, packages=False)


def test_plugin_by_entry_point(plugin_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    group = "traceattr.backends"
    good = importlib.metadata.EntryPoint("torch-mla", PLUGIN, group)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group=None: [good] if group else [])
    assert list(registry())[-1] == "torch-mla"
    assert [a.label for a in default_arms()][-1] == "torch-mla"
    assert parse_arm("torch-mla[graphs]").program == "torch-mla"
    clash = importlib.metadata.EntryPoint("fa3", PLUGIN, group)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group=None: [clash])
    with pytest.raises(TraceattrError, match="clashes with a built-in backend"):
        registry()
    broken = importlib.metadata.EntryPoint("broken", "nosuchpkg.mod:X", group)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group=None: [broken])
    with pytest.raises(TraceattrError, match=r"entry point 'broken' \(nosuchpkg.mod:X\) .* cannot load"):
        parse_arm("broken")


def test_plan_carries_arm_labels_and_protocol(tmp_path: Path) -> None:
    shapes = [parse_shape("q8_ctx900k"), parse_shape("q8_ctx900k_dcp8")]
    plan = make_plan(shapes, ["fa3", "fa3[splits=4]", "flashmla"], between="flush+fa3", order="blocked",
                     out_root=tmp_path)  # fmt: skip
    assert plan.run.arms == ("fa3", "fa3[splits=4]", "flashmla")
    assert (plan.run.between, plan.run.order) == ("flush+fa3", "blocked")
    assert RunPlan.read(plan.run.write(tmp_path / "plan.json")) == plan.run
    assert plan.backends == ("fa3", "fa3[splits=4]", "flashmla")
    assert {a.backend for a in plan.availability} == {"fa3", "fa3[splits=4]", "flashmla"}
    # a DCP row's cache is the rank's shard
    assert plan.tensors["q8_ctx900k_h16_b1_bf16_p64_dcp8"]["pages"] == 1758
    for bad, needle in (({"order": "random"}, "--order must be one of abba, blocked"),
                        ({"between": "sleep"}, r"--between must be flush, none or flush\+ARM"),
                        ({"between": "flush+nope"}, "unknown backend 'nope'")):  # fmt: skip
        with pytest.raises(TraceattrError, match=needle):
            make_plan(shapes, ["fa3"], out_root=tmp_path, **bad)  # type: ignore[arg-type]
    assert isinstance(plan.arms[1], Arm) and plan.arms[1].get("splits") == 4


def test_call_order() -> None:
    abba = call_order(("A", "B"), 3, "abba")
    assert abba == [[("A", 0), ("B", 0)], [("B", 1), ("A", 1)], [("A", 2), ("B", 2)]]
    blocked = call_order(("A", "B"), 3, "blocked")
    assert [c for g in blocked for c in g] == [("A", 0), ("A", 1), ("A", 2), ("B", 0), ("B", 1), ("B", 2)]
    assert {len(g) for g in blocked} == {2}  # as many calls in flight as with abba
    assert between_arm("flush") is None and between_arm("none") is None and between_arm("flush+fa3") == "fa3"
    with pytest.raises(ValueError, match="flush\\+ARM"):
        between_arm("flush+")


def test_noise_target_adds_rounds_until_every_arm_is_precise() -> None:
    plan = RunPlan(shapes=("s",), arms=("A", "B"), iters=20, max_noise=0.005, max_iters=45)
    assert more_iterations(20, {"A": 0.004, "B": 0.009}, plan) == NOISE_STEP  # one arm is still noisy
    assert more_iterations(20, {"A": 0.004, "B": float("nan")}, plan) == NOISE_STEP  # too few calls to tell
    assert more_iterations(30, {"A": 0.004, "B": 0.005}, plan) == 0  # both precise enough
    assert more_iterations(40, {"A": 0.02, "B": 0.02}, plan) == 5  # never past max_iters ...
    assert more_iterations(45, {"A": 0.02, "B": 0.02}, plan) == 0  # ... where it stops, noisy or not
    assert more_iterations(20, {"A": 0.02}, RunPlan(shapes=("s",), arms=("A",), iters=20)) == 0  # no target: fixed
    blocked = RunPlan(shapes=("s",), arms=("A", "B"), iters=20, max_noise=0.005, order="blocked")
    assert more_iterations(20, {"A": 0.02, "B": 0.02}, blocked) == NOISE_STEP  # back to back samples alike ...
    more = [c for g in call_order(("A", "B"), 2, "blocked", start=20) for c in g]
    assert more == [("A", 20), ("A", 21), ("B", 20), ("B", 21)]  # ... in one more block per arm
    unbounded = RunPlan(shapes=("s",), arms=("A", "B"), iters=20, max_noise=0.005)
    assert more_iterations(DEFAULT_MAX_ITERS - 10, {"A": 0.02}, unbounded) == 10
    assert more_iterations(DEFAULT_MAX_ITERS, {"A": 0.02}, unbounded) == 0
    # added rounds continue the ABBA alternation where the first ones stopped
    assert call_order(("A", "B"), 2, "abba", start=3) == [[("B", 3), ("A", 3)], [("A", 4), ("B", 4)]]
    bad_settings = (((20, 0.0, None), "max-noise"), ((20, 1.5, None), "max-noise"), ((20, 0.01, 10), "max-iters"),
                    ((20, None, None, -1.0), "hold-us"), ((20, None, None, 2e4), "hold-us"))  # fmt: skip
    for bad, needle in bad_settings:
        with pytest.raises(TraceattrError, match=needle):
            check_timing(*bad)
    check_timing(20, 0.005, 500, 100.0)


def test_a_hold_is_refused_under_blocking_launches(monkeypatch: pytest.MonkeyPatch) -> None:
    # seen on the H100: every launch waited for its kernel, the hold spun out its timeout, no capture ran
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")
    with pytest.raises(TraceattrError, match=r"CUDA_LAUNCH_BLOCKING=1 .*--no-hold"):
        check_timing(20, 0.005, 500, 100.0)
    check_timing(20, 0.005, 500, 0.0)  # no hold: nothing to exclude


@pytest.mark.slow
def test_profile_dry_run_with_arms(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "250", "PYTHONPATH": f"{PLUGIN_ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run(
        [sys.executable, "-m", "traceattr", "profile", "--shape", "q8_ctx900k", "--shape", "q8_ctx900k_dcp8",
         "-b", "fa3", "-b", "fa3[splits=4]", "--arm", f"cand={PLUGIN}", "-b", "flashmla", "-b", "trtllm-gen",
         "--between", "flush+fa3", "--order", "blocked", "--dry-run", "--out-root", str(tmp_path)],
        capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    for needle in ("fa3[splits=4]", "cand", "trtllm's decode kernel doesn't implement DCP",
                   "each arm back to back", "then fa3's call before every call"):  # fmt: skip
        assert needle in out.stdout, needle
    bad = subprocess.run(
        [sys.executable, "-m", "traceattr", "profile", "--shape", "q8_ctx9k", "-b", "flashmla[splits=2]", "--dry-run"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "flashmla has no option 'splits'" in bad.stderr


def test_arm_labels_survive_analysis_and_terminal(tmp_path: Path) -> None:
    """Labels with brackets and '=' go through call names, the summary and rich tables intact."""
    import polars as pl

    import traceattr
    from tests.synth.builder import TraceBuilder
    from traceattr.analysis.pipeline import analyse
    from traceattr.core.callnames import CallName, parse_message
    from traceattr.present.comparison import render_summary
    from traceattr.present.console import console

    fa3 = "flashinfer::mla::hopper::BatchMLAPageAttentionHopperKernel<true, 1>"
    merge = "flashinfer::MergeStatesLargeNumIndexSetsKernel<8u, 64u, 2u, 4u, __nv_bfloat16, __nv_bfloat16>"
    b = TraceBuilder()
    dom = b.domain("traceattr", tid=1)
    t = 1_000
    for it in range(4):
        for label, letter, kernels in (("fa3", "A", [fa3]), ("fa3[splits=4]", "B", [fa3, fa3, merge])):
            message = CallName(label, "q8_ctx900k_h16_b1_bf16_p64", letter, it).message
            assert parse_message(message) == CallName(label, "q8_ctx900k_h16_b1_bf16_p64", letter, it)
            b.push_range(tid=1, start=t, end=t + 9_000, message=message, domain=dom)
            for k, name in enumerate(kernels):
                b.launch(tid=1, start=t + 100 + 10 * k, end=t + 105 + 10 * k, kernel=name,
                         gpu_start=t + 1_000 + 2_000 * k, gpu_end=t + 2_900 + 2_000 * k)  # fmt: skip
            t += 10_000
    result = analyse(traceattr.open(b.write(tmp_path / "labels.sqlite")).attribute())
    summary = result.summary
    assert set(summary["backend"]) == {"fa3", "fa3[splits=4]"}
    split = summary.filter(pl.col("backend") == "fa3[splits=4]").row(0, named=True)
    assert split["reduce_exposed_us"] > 0 and split["kernels"] == 3
    con = console()
    with con.capture() as out:
        render_summary(summary, con, [("q8_ctx900k", "cand[graphs]", "needs sm_100")])
    text = out.get()
    assert "fa3[splits=4]" in text and "cand[graphs] not run" in text
    tied = summary.with_columns(pl.lit("tie").alias("verdict"), pl.lit(1.0).alias("tie_pct"))
    with con.capture() as out:
        render_summary(tied, con, [])
    assert "between fa3, fa3[splits=4]: no winner" in out.get()  # a caption is not markup either


def test_levers_example_trace() -> None:
    """The H200 levers run in examples/traces: arm labels, and the split lever's separate merge kernel."""
    import polars as pl

    import traceattr
    from traceattr.analysis.pipeline import analyse

    trace = Path(__file__).parent.parent / "examples" / "traces" / "h200_mla_levers.sqlite"
    summary = analyse(traceattr.open(trace).attribute()).summary
    arms = {"fa3", "fa3[splits=2]", "fa3[splits=4]", "fa3[splits=8]", "fa3[splits=16]", "fa3[graphs]",
            "fa3[page=32]", "fa3[kv=fp8]", "fa3-per-token"}  # fmt: skip
    assert set(summary["backend"]) == arms
    split = summary.filter(pl.col("backend").str.starts_with("fa3[splits="))
    assert (split["reduce_exposed_us"] > 0).all()
    # q = 8: the causal last chunk is its own launch (2 attention kernels + merge); q = 1: one launch + merge
    kernels = dict(split.select(pl.format("{} {}", "shape", "backend"), "kernels").iter_rows())
    assert kernels["q8_ctx900k_h16_b1_bf16_p64 fa3[splits=4]"] == 3
    assert kernels["q1_ctx900k_h16_b1_bf16_p64 fa3[splits=4]"] == 2
    plain = summary.filter(pl.col("backend").is_in(["fa3", "fa3[graphs]", "fa3[page=32]"]))
    assert (plain["reduce_exposed_us"] == 0).all() and (plain["kernels"] == 1).all()


def test_split_mla_refuses_the_tile_triton_miscompiles(monkeypatch: pytest.MonkeyPatch) -> None:
    # examples/split_mla's plug-in, read from the tree (no torch, no install): block_n 64 faulted on the H100
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "examples" / "split_mla"))
    backend = importlib.import_module("split_mla.backend")
    shape = parse_shape("q1_ctx2000")
    with pytest.raises(ValueError, match=r"block_n 64 is refused: Triton 3\.6 miscompiles"):
        backend.SplitMLA(block_n=64, stages=2).prepare(shape, None)
    assert backend.geometry(shape, block_n=32) == (32, 64, 1)  # the verified tile still plans: 32 splits × 64
