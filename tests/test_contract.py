"""The API contract: every keyword traceattr passes to flashinfer and FlashMLA binds to the installed signature.

Each call's arguments come from the function the call site itself uses (``TrtllmDecode.call_kwargs``,
``flashinfer_wrapper.wrapper_kwargs``/``csr_args``/``plan_kwargs``/``run_kwargs``/``merge_args``,
``flashmla.flashmla_call``, ``runtime.graphs.graph_buffers``), fed placeholders for the tensors, for
every backend and every arm option that changes a keyword (KV dtype, ragged queries, splits, LSE, the
CUDA-graph buffers, and each rank's call of flashinfer's own DCP path on cute-dsl's DCP rows:
``TrtllmDecode.dcp_plan``). ``inspect.signature(fn).bind(*args, **kwargs)`` then fails on a keyword the
installed version does not take — on this machine, not on a B200 user's first run.

Skipped where flashinfer / flash_mla do not import (CI has neither: they need torch and CUDA
libraries); runs in the GPU tests on the H200. No GPU work: nothing is called, only bound.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from traceattr.backends import BACKENDS, Device
from traceattr.backends.arms import arm_backend, check_arm, parse_arm
from traceattr.backends.dcp import DcpRank
from traceattr.backends.flashinfer_trtllm import TrtllmDecode
from traceattr.backends.flashinfer_wrapper import (
    FlashinferMLA,
    csr_args,
    merge_args,
    plan_kwargs,
    run_kwargs,
    scale_kwargs,
    wrapper_kwargs,
)
from traceattr.backends.flashmla import flashmla_call
from traceattr.core.errors import BackendUnsupported
from traceattr.core.shapes import parse_shape

B200 = Device("NVIDIA B200", (10, 0), 148)
H200 = Device("NVIDIA H200", (9, 0), 132)
# uniform bf16, uniform fp8 (scales), ragged (cum_seq_lens_q / max_q_len), one query token (non-causal), H = 128
SHAPES = ("q8_ctx8k_h16", "q8_ctx8k_h16_fp8", "q4_ctx4100_h96_b3_ragged", "q1_ctx20000_h128", "q2_ctx3000_h64_b2")
# DCP rows of flashinfer's own DCP path: the seeds' TP1+DCP8 row (H = 96, ctx ~125k), ragged queries, q = 1
DCP_SHAPES = ("q8_ctx125k_h96_dcp8", "q4_ctx4100_h16_b3_ragged_dcp4", "q1_ctx20000_h128_dcp2")
TENSOR = object()  # a placeholder: binding checks names, never values


def _import(name: str) -> Any:
    try:
        return pytest.importorskip(name)
    except Exception as exc:  # an import that fails for want of CUDA libraries is a skip here too
        pytest.skip(f"{name} does not import here: {type(exc).__name__}: {exc}")


def bind(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> inspect.BoundArguments:
    """Bind to *fn*'s signature; a signature that takes any keyword would make the check vacuous."""
    sig = inspect.signature(fn)
    assert not any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()), (
        f"{fn.__qualname__}{sig} takes **kwargs: binding cannot check the keywords (follow __wrapped__?)"
    )
    return sig.bind(*args, **kwargs)


def misspelt(kwargs: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """*kwargs* with one keyword misspelt, for each keyword: each must fail to bind (the mutation check)."""
    for key in kwargs:
        mutated = dict(kwargs)
        mutated[key[:-1] + ("_" if key[-1] != "_" else "x")] = mutated.pop(key)
        yield mutated


def trtllm_calls() -> Iterator[tuple[str, dict[str, Any]]]:
    """(id, kwargs) of every Blackwell call traceattr makes: backend × shape × LSE (where the arm can)."""
    for name, shape_name, kv in itertools.product(("trtllm-gen", "cute-dsl", "cake"), SHAPES, ("", "[kv=fp8]")):
        arm = parse_arm(name + kv)
        backend = arm_backend(arm)
        assert isinstance(backend, TrtllmDecode)
        try:
            plan = check_arm(arm, parse_shape(shape_name), B200, packages=False)
        except BackendUnsupported:
            continue
        for lse in (False, True) if backend.caps.lse else (False,):
            tensors = dict.fromkeys(plan.tensors, TENSOR)
            kwargs = backend.call_kwargs(plan, tensors, kv_scale=0.5, counter=TENSOR, lse=lse)
            yield f"{arm.text}:{shape_name}:lse={lse}", kwargs


def dcp_calls() -> Iterator[tuple[str, dict[str, Any]]]:
    """(id, kwargs) of every rank's call of flashinfer's own DCP path (cute-dsl) on the DCP rows."""
    for shape_name, kv in itertools.product(DCP_SHAPES, ("", "[kv=fp8]")):
        arm = parse_arm("cute-dsl" + kv)
        backend = arm_backend(arm)
        assert isinstance(backend, TrtllmDecode) and backend.native_dcp
        row = arm.data_shape(parse_shape(shape_name))
        check_arm(arm, row, B200, packages=False)  # a row the arm takes
        for r in range(row.dcp):
            rank = DcpRank(row, r)
            plan = backend.dcp_plan(rank.shape(), rank)
            kwargs = backend.call_kwargs(plan, dict.fromkeys(plan.tensors, TENSOR), kv_scale=0.5, lse=True)
            yield f"{arm.text}:{shape_name}:rank{r}", kwargs


def wrapper_calls() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(id, method, kwargs) of every flashinfer wrapper call of the eager fa2/fa3 arms (splits, kv, LSE)."""
    for name, shape_name, opts in itertools.product(
        ("fa2", "fa3", "fa3-per-token"), SHAPES, ("", "[splits=4]", "[kv=fp8]", "[kv=fp8,splits=2]")
    ):
        if "splits" in opts and not any(o.name == "splits" for o in BACKENDS[name].caps.options):
            continue
        arm = parse_arm(name + opts)
        backend = arm_backend(arm)
        assert isinstance(backend, FlashinferMLA)
        try:
            plan = check_arm(arm, parse_shape(shape_name), H200, packages=False)
        except BackendUnsupported:
            continue
        ident = f"{arm.text}:{shape_name}"
        yield ident, "__init__", wrapper_kwargs(backend.wrapper_backend)
        scales = scale_kwargs(plan.shape.kv_dtype, 0.5)
        for lse in (False, True):  # lse=True: a DCP rank's call
            yield ident, "plan", plan_kwargs(TENSOR, heads=plan.shape.heads, page=plan.shape.page,
                                             causal=plan.scalars["causal"], q_dtype=TENSOR, kv_dtype=TENSOR, lse=lse)  # fmt: skip
            yield ident, "run", run_kwargs(TENSOR, TENSOR, scales, lse=lse)
        if backend.splits > 1:
            yield ident, "run", run_kwargs(TENSOR, TENSOR, scales, out=TENSOR, out_lse=TENSOR)


TRTLLM = list(trtllm_calls()) + list(dcp_calls())
WRAPPER = list(wrapper_calls())


def test_every_arm_option_has_a_call() -> None:
    """The lists above are not empty by accident: each backend, dtype, LSE and split form is there."""
    ids = [i for i, _ in TRTLLM]
    for needle in ("trtllm-gen:", "cute-dsl:", "cake:", "[kv=fp8]:", "lse=True", "_ragged"):
        assert any(needle in i for i in ids), needle
    assert any("cum_seq_lens_q" in kw and "max_q_len" in kw for _, kw in TRTLLM)
    assert any("multi_ctas_kv_counter_buffer" in kw for _, kw in TRTLLM)
    assert any(kw.get("return_lse_base") == "base2" for _, kw in TRTLLM)
    dcp = [kw for i, kw in TRTLLM if ":rank" in i]
    assert dcp and all(kw["enable_dcp"] is True and kw["return_lse"] is True for kw in dcp)
    assert {kw["cp_rank"] for kw in dcp} == set(range(8)) and {kw["cp_world"] for kw in dcp} == {2, 4, 8}
    assert all("causal_seqlens_kv_global" in kw for kw in dcp)
    assert any("cum_seq_lens_q" in kw for kw in dcp)  # the ragged DCP row: compact queries
    methods = {(i.split("[")[0].split(":")[0], m) for i, m, _ in WRAPPER}
    assert {("fa2", "plan"), ("fa3", "run"), ("fa3-per-token", "__init__")} <= methods
    assert any("ckv_scale" in kw for _, m, kw in WRAPPER if m == "run")
    assert any("out" in kw and kw.get("return_lse") for _, m, kw in WRAPPER if m == "run")


@pytest.mark.parametrize(("ident", "kwargs"), TRTLLM, ids=[i for i, _ in TRTLLM])
def test_trtllm_decode_keywords_bind(ident: str, kwargs: dict[str, Any]) -> None:
    flashinfer = _import("flashinfer")
    bind(flashinfer.mla.trtllm_batch_decode_with_kv_cache_mla, **kwargs)


@pytest.mark.parametrize(("ident", "method", "kwargs"), WRAPPER, ids=[f"{i}:{m}" for i, m, _ in WRAPPER])
def test_wrapper_keywords_bind(ident: str, method: str, kwargs: dict[str, Any]) -> None:
    flashinfer = _import("flashinfer")
    cls = flashinfer.mla.BatchMLAPagedAttentionWrapper
    args = (None, TENSOR) if method == "__init__" else (None,)  # self (unbound), then the workspace
    bind(getattr(cls, method), *args, **kwargs)


def test_csr_metadata_and_merge_bind() -> None:
    flashinfer = _import("flashinfer")
    bind(flashinfer.mla.MLAPlanMetadata.csr, *csr_args(TENSOR, TENSOR, TENSOR, TENSOR))
    bind(flashinfer.merge_states, *merge_args(TENSOR, TENSOR))
    with pytest.raises(TypeError):  # one argument short
        bind(flashinfer.mla.MLAPlanMetadata.csr, *csr_args(TENSOR, TENSOR, TENSOR, TENSOR)[:3])


def test_runtime_graph_wrapper_binds() -> None:
    """traceattr.runtime's CUDA-graph wrapper: use_cuda_graph=True plus its four caller-owned buffers."""
    flashinfer = _import("flashinfer")
    from traceattr.runtime.graphs import graph_buffers

    buffers = graph_buffers(4, 16, "cpu")
    kwargs = wrapper_kwargs("fa3", buffers)
    assert kwargs["use_cuda_graph"] is True and set(buffers) <= set(kwargs)
    bind(flashinfer.mla.BatchMLAPagedAttentionWrapper.__init__, None, TENSOR, **kwargs)
    for mutated in misspelt(kwargs):
        with pytest.raises(TypeError):
            bind(flashinfer.mla.BatchMLAPagedAttentionWrapper.__init__, None, TENSOR, **mutated)


@pytest.mark.parametrize("causal", [False, True])
def test_flashmla_call_binds(causal: bool) -> None:
    flash_mla = _import("flash_mla")
    args, kwargs = flashmla_call(TENSOR, TENSOR, TENSOR, TENSOR, TENSOR, causal=causal)
    bind(flash_mla.flash_mla_with_kvcache, *args, **kwargs)
    for mutated in misspelt(kwargs):
        with pytest.raises(TypeError):
            bind(flash_mla.flash_mla_with_kvcache, *args, **mutated)
    # get_mla_metadata() takes no arguments (its *args/**kwargs only keep old callers working): called bare
    inspect.signature(flash_mla.get_mla_metadata).bind()


def test_a_misspelt_keyword_fails_to_bind() -> None:
    """The mutation check: every keyword of every call, misspelt in turn, makes the binding fail."""
    flashinfer = _import("flashinfer")
    fn = flashinfer.mla.trtllm_batch_decode_with_kv_cache_mla
    for _, kwargs in TRTLLM:
        for mutated in misspelt(kwargs):
            with pytest.raises(TypeError):
                bind(fn, **mutated)
    cls = flashinfer.mla.BatchMLAPagedAttentionWrapper
    for _, method, kwargs in WRAPPER:
        args = (None, TENSOR) if method == "__init__" else (None,)
        for mutated in misspelt(kwargs):
            with pytest.raises(TypeError):
                bind(getattr(cls, method), *args, **mutated)


def test_every_builtin_backend_is_covered() -> None:
    """A backend added to the registry without a contract entry here fails this test."""
    covered = {"trtllm-gen", "cute-dsl", "cake", "fa2", "fa3", "fa3-per-token", "flashmla"}
    assert set(BACKENDS) == covered
