"""On a CUDA GPU: every available backend agrees with the torch reference, and
``traceattr profile`` captures, attributes and summarises a real run.

Skipped without a GPU (marker ``gpu``). On the H200: fa2, fa3, fa3-per-token,
FlashMLA; Blackwell backends must report themselves unavailable.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

from traceattr.backends import BACKENDS, check, current_device, get_backend  # noqa: E402
from traceattr.backends.base import SM_SCALE  # noqa: E402
from traceattr.backends.inputs import build_inputs  # noqa: E402
from traceattr.backends.reference import mla_reference, mla_reference_lse, relative_error  # noqa: E402
from traceattr.core.errors import BackendUnsupported  # noqa: E402
from traceattr.core.shapes import parse_shape  # noqa: E402

SHAPES = ["q8_ctx8k_h16", "q1_ctx20000_h128", "q4_ctx4100_h96_b3_ragged", "q8_ctx8k_h16_fp8", "q2_ctx3000_h16_b2_row"]


@pytest.mark.parametrize("shape_name", SHAPES)
@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_backend_matches_reference(shape_name: str, name: str) -> None:
    shape = parse_shape(shape_name)
    device, _ = current_device()
    try:
        check(name, shape, device)
    except BackendUnsupported as err:
        if device.cc == (9, 0) and name in ("fa2", "fa3", "fa3-per-token") and shape.pattern != "row":
            raise AssertionError(f"{name} must run on an H200: {err}") from None
        pytest.skip(str(err))
    inputs = build_inputs(shape, shuffle=True, seed=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call = get_backend(name).prepare(shape, inputs)
        out = call.output_rows(call.run())
        torch.cuda.synchronize()
    # the current APIs only: no deprecated call forms
    assert not [w for w in caught if issubclass(w.category, (DeprecationWarning, FutureWarning))], [
        str(w.message) for w in caught
    ]
    ref = mla_reference(inputs, inputs.layout.requests(), SM_SCALE)
    assert out.shape == ref.shape
    limit = 0.08 if shape.kv_dtype == "fp8" else 0.02
    assert relative_error(out, ref) < limit
    # and the check is able to fail: a wrong answer (features shifted) is far off
    assert relative_error(out.roll(1, dims=-1), ref) > 0.5


def test_blackwell_backends_say_why_on_hopper() -> None:
    device, _ = current_device()
    if device.cc[0] != 9:
        pytest.skip("Hopper-only expectation")
    for name in ("trtllm-gen", "cute-dsl", "cake"):
        with pytest.raises(BackendUnsupported, match=r"needs sm_10"):
            check(name, parse_shape("q8_ctx900k"), device)


@pytest.mark.skipif(not (os.environ.get("TRACEATTR_NSYS") or shutil.which("nsys")), reason="needs nsys")
def test_profile_end_to_end(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "traceattr", "profile", "--shape", "q4_ctx16k_h16", "--iters", "4", "--warmup", "1",
         "--out-root", str(tmp_path), "-b", "fa3", "-b", "flashmla", "-b", "trtllm-gen"],
        capture_output=True, text=True, check=False, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (folder,) = tmp_path.iterdir()
    names = {p.name for p in folder.iterdir()}
    assert {
        "trace.nsys-rep",
        "trace.sqlite",
        "run.json",
        "runner.json",
        "summary.csv",
        "calls.csv",
        "report.html",
    } <= names
    run = json.loads((folder / "run.json").read_text())
    assert run["gpu"]["name"] and run["versions"]["torch"]
    import polars as pl

    summary = pl.read_csv(folder / "summary.csv")
    backends = set(summary["backend"].to_list())
    assert "fa3" in backends and "trtllm-gen" not in backends
    assert summary.filter(pl.col("backend") == "fa3")["calls"].item() == 4
    assert summary.filter(pl.col("backend") == "fa3")["reduce_exposed_us"].item() == 0
    if "flashmla" in backends:  # split + combine: the reduce is its own kernel
        assert summary.filter(pl.col("backend") == "flashmla")["reduce_exposed_us"].item() > 0
    # CUDA events recorded around each call bracket its GPU span (they add the launch
    # overhead, which dominates calls this small, so only the lower bound is tight)
    assert (summary["event_vs_span"] > -0.05).all()
    assert "trtllm-gen" in out.stdout and "needs sm_10" in out.stdout


# --- arms: levers and plug-ins, each checked against the torch reference -------------------------

PLUGIN_ROOT = Path(__file__).parent.parent / "examples" / "mla_plugin"
PLUGIN = "mla_plugin.torch_mla:TorchMLA"


def _arm_output(text: str, shape_name: str, *, shuffle: bool = True):
    """(output rows, the reference of what the arm read, the runner's entry) of one arm on one shape."""
    from traceattr.backends.arms import parse_arm
    from traceattr.runner.loop import ShapeInputs, check_output, prepare_arm
    from traceattr.runner.plan import RunPlan

    shape = parse_shape(shape_name)
    plan = RunPlan(shapes=(shape.name,), arms=(text,), shuffle=shuffle, seed=3)
    data = ShapeInputs(shape, plan)
    arm = parse_arm(text)
    call, inputs = prepare_arm(arm, shape, data, plan.seed)
    entry: dict = {}
    refusal = check_output(arm, shape, call, inputs, data, plan, entry)
    assert refusal is None, refusal
    return call.output_rows(call.run()), data.reference(inputs), entry


@pytest.mark.parametrize("shape_name", ["q8_ctx8k_h16", "q1_ctx20000_h128", "q4_ctx4100_h96_b3_ragged", "q8_ctx8k_fp8"])
@pytest.mark.parametrize("splits", [2, 4, 16])
def test_split_kv_arm_matches_the_reference(shape_name: str, splits: int) -> None:
    out, ref, entry = _arm_output(f"fa3[splits={splits}]", shape_name)
    limit = 0.08 if "fp8" in shape_name else 0.02
    assert relative_error(out, ref) < limit and entry["relative_error"] < limit
    # rows in request order, not just any order (one row: the features in order)
    assert relative_error(out.roll(1, dims=0 if out.shape[0] > 1 else -1), ref) > 0.5
    fa3, _, _ = _arm_output("fa3", shape_name)
    assert relative_error(out, fa3.float()) < limit  # the lever changes the merge, not the answer


@pytest.mark.parametrize("text", ["fa3", "fa3[splits=4]", "fa2", f"cand={PLUGIN}", "flashmla"])
def test_dcp_row_is_the_rank_share_plus_the_merge(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PLUGIN_ROOT))
    out, _, entry = _arm_output(text, "q8_ctx64k_dcp4")
    # the rank's own partial matches the reference over its shard; the merge matches a torch merge; its LSE is
    # the base-2 log-sum-exp of the true scores (not merely consistent with itself)
    assert entry["relative_error"] < 0.02 and entry["merge_relative_error"] < 0.01 and entry["lse_abs_error"] < 0.05
    assert out.shape == (8, 16, 512)


@pytest.mark.parametrize("text", ["fa3[page=32]", "fa3[kv=fp8]", "fa2[page=16]", "flashmla[graphs]"])
def test_data_options_read_the_same_tokens(text: str) -> None:
    out, ref, _ = _arm_output(text, "q8_ctx8k_h16")
    assert relative_error(out, ref) < (0.08 if "fp8" in text else 0.02)
    _, base_ref, _ = _arm_output("fa3", "q8_ctx8k_h16")
    # re-paging keeps every token, so the answer is the same as on the original cache
    assert relative_error(out, base_ref) < (0.08 if "fp8" in text else 0.02)


@pytest.mark.parametrize("shape_name", ["q8_ctx8k_h16", "q4_ctx4100_h96_b3_ragged", "q1_ctx20000_h128"])
def test_plugin_example_matches_the_reference(shape_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PLUGIN_ROOT))
    out, ref, entry = _arm_output(f"cand={PLUGIN}", shape_name)
    assert relative_error(out, ref) < 0.02 and len(entry["output_sha256"]) == 64


@pytest.mark.skipif(not (os.environ.get("TRACEATTR_NSYS") or shutil.which("nsys")), reason="needs nsys")
def test_profile_arms_and_protocol(tmp_path: Path) -> None:
    """runner.json carries arms, protocol, per-shape clocks and output fingerprints; between ranges run."""
    env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": f"{PLUGIN_ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run(
        [sys.executable, "-m", "traceattr", "profile", "--shape", "q4_ctx16k_h16", "--shape", "q4_ctx64k_dcp4",
         "--iters", "4", "--warmup", "1", "--out-root", str(tmp_path), "-b", "fa3", "-b", "fa3[graphs]",
         "-b", "fa3[splits=4]", "--arm", f"cand={PLUGIN}", "-b", "flashmla", "--between", "flush+fa2",
         "--order", "blocked"],
        capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (folder,) = tmp_path.iterdir()
    runner = json.loads((folder / "runner.json").read_text())
    assert runner["protocol"]["between"] == "flush+fa2" and runner["protocol"]["order"] == "blocked"
    arms = runner["arms"]
    assert arms["fa3"]["program"] == arms["fa3[graphs]"]["program"] != arms["fa3[splits=4]"]["program"]
    assert arms["cand"] == {"backend": PLUGIN, "options": {}, "program": PLUGIN}
    for name, shape in runner["shapes"].items():
        clocks = shape["clocks"]
        assert clocks["sm_clock_max_mhz"] and 0.3 < clocks["fraction"] <= 1.0 and clocks["samples"] >= 2, name
        ok = {k: v for k, v in shape["backends"].items() if v["status"] == "ok"}
        assert {"fa3", "fa3[graphs]", "fa3[splits=4]", "cand"} <= set(ok), shape["backends"]
        assert ok["fa3"]["output_sha256"] == ok["fa3[graphs]"]["output_sha256"]  # one program, bitwise
    dcp_flashmla = runner["shapes"]["q4_ctx64k_h16_b1_bf16_p64_dcp4"]["backends"]["flashmla"]
    assert dcp_flashmla["status"] == "ok" and dcp_flashmla["lse_abs_error"] < 0.05  # its LSE, converted to base 2
    import polars as pl

    summary = pl.read_csv(folder / "summary.csv")
    assert {"fa3", "fa3[graphs]", "fa3[splits=4]", "cand"} <= set(summary["backend"].to_list())
    assert summary.filter(pl.col("backend") == "fa3[splits=4]")["reduce_exposed_us"].min() > 0  # merge_states: a reduce
    calls = pl.read_csv(folder / "calls.csv")
    assert calls.group_by("shape", "backend").len()["len"].unique().to_list() == [4]
    ranges = pl.read_parquet(folder / "ranges.parquet")
    assert ranges.filter(pl.col("message") == "between").height == calls.height  # one predecessor per call
    # a lead call opens each group of 5 calls (blocked order: groups as wide as the arms), untimed
    assert runner["protocol"]["lead"] is True
    assert ranges.filter(pl.col("message") == "lead").height == calls.height // 5


@pytest.mark.skipif(not (os.environ.get("TRACEATTR_NSYS") or shutil.which("nsys")), reason="needs nsys")
@pytest.mark.parametrize(("max_noise", "max_iters", "loose"), [(0.3, 40, True), (1e-5, 12, False)])
def test_noise_target_adds_rounds(tmp_path: Path, max_noise: float, max_iters: int, loose: bool) -> None:
    """--max-noise: 4 rounds are too few for an interval, so iterations are added ten at a time until a loose
    target is met (before the cap: how many blocks depends on this GPU's noise); a tight one stops at the cap."""
    out = subprocess.run(
        [sys.executable, "-m", "traceattr", "profile", "--shape", "q1_ctx8k_h16", "--iters", "4", "--warmup", "1",
         "--max-noise", str(max_noise), "--max-iters", str(max_iters), "--out-root", str(tmp_path),
         "-b", "fa3", "-b", "again=fa3", "--graphs", "--hold-us", "100"],
        capture_output=True, text=True, check=False, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (folder,) = tmp_path.iterdir()
    runner = json.loads((folder / "runner.json").read_text())
    (shape,) = runner["shapes"].values()
    sampling = shape["sampling"]
    expected = sampling["iters"]
    assert sampling["max_noise"] == max_noise
    if loose:
        assert expected in (14, 24, 34)  # 4, then blocks of ten, stopped before the cap of 40
    else:
        assert expected == max_iters  # the cap, even though that is not a whole block
    assert set(sampling["noise"]) == {"fa3", "again"}
    met = all(v <= max_noise for v in sampling["noise"].values())
    assert met if loose else not met
    import polars as pl

    calls = pl.read_csv(folder / "calls.csv")
    assert calls.group_by("backend").len()["len"].to_list() == [expected, expected]  # every arm, every round
    assert sorted(calls["iter"].unique().to_list()) == list(range(expected))
    ranges = pl.read_parquet(folder / "ranges.parquet")
    assert ranges.filter(pl.col("message") == "hold").height == expected  # one GPU hold before each ABBA group
    assert runner["protocol"]["hold_us"] == 100 and runner["protocol"]["hold"] == "host"
    hold = shape["hold"]  # the host released every group; the GPU waited for it and the host's times are recorded
    assert hold["groups"] == expected and hold["timeouts"] == 0
    assert 0 < hold["gpu_wait_us"]["median"] < 100_000 and hold["group_enqueue_us"]["median"] > 0
    assert set(hold["call_enqueue_us"]) == {"fa3", "again"}


# --- the hold that the host releases (nvbench's blocking kernel) -------------------------------


def test_hold_blocks_the_stream_until_released() -> None:
    import time

    from traceattr.runner.hold import HostHold

    hold = HostHold(timeout_s=5.0)
    for _ in range(3):  # holds one after another with nothing between them (a stale flag would let one through)
        hold.hold()
        done = torch.cuda.Event()
        done.record()
        time.sleep(0.01)
        assert not done.query()
        hold.release()
        torch.cuda.synchronize()
    x = torch.zeros(1, device="cuda")
    # a kernel's first launch loads its module (CUDA's lazy loading), which waits for the device to go idle:
    # behind a hold that would wait for the timeout. The runner warms every arm before it holds; so does this.
    x.add_(1)
    torch.cuda.synchronize()
    hold.hold()
    x.add_(1)
    done = torch.cuda.Event()
    done.record()
    time.sleep(0.05)
    assert not done.query()  # the work behind the hold waits for the host
    hold.release()
    torch.cuda.synchronize()
    result = hold.result()
    assert not result.timed_out and x.item() == 2
    assert 40e6 < result.gpu_wait_ns < 2e9 and result.enqueue_ns >= 45e6  # the GPU waited while the host slept


def test_hold_holds_a_graph_replay() -> None:
    import time

    from traceattr.runner.hold import HostHold

    hold = HostHold(timeout_s=5.0)
    x = torch.zeros(1, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x.add_(1)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        x.add_(1)
    torch.cuda.synchronize()
    hold.hold()
    graph.replay()
    done = torch.cuda.Event()
    done.record()
    time.sleep(0.02)
    assert not done.query()
    hold.release()
    torch.cuda.synchronize()
    assert x.item() == 2 and not hold.result().timed_out


def test_hold_times_out_and_says_so() -> None:
    from traceattr.runner.hold import HostHold

    hold = HostHold(timeout_s=0.02)
    hold.hold()
    torch.cuda.synchronize()  # what a call that synchronizes inside the group does: no hang, a timeout
    result = hold.result()
    hold.release()
    assert result.timed_out and 15e6 < result.gpu_wait_ns < 1e9


def test_reference_lse_is_base_2_of_the_scores() -> None:
    """The reference LSE the DCP check trusts, against a direct logsumexp over every key."""
    shape = parse_shape("q4_ctx1000_h16_b2")
    inputs = build_inputs(shape, seed=5)
    req = inputs.layout.requests()
    out, lse = mla_reference_lse(inputs, req, SM_SCALE, chunk=256)  # several chunks: the recurrence is exercised
    for r in range(req.batch):
        lo, hi = req.qo_indptr[r], req.qo_indptr[r + 1]
        tok = torch.arange(req.kv_lens[r], device=inputs.device)
        pages = torch.tensor(req.pages[r], dtype=torch.long, device=inputs.device)
        keys = inputs.kv[pages[tok // req.page_size], tok % req.page_size].float()
        scores = torch.einsum("shd,cd->shc", inputs.q[lo:hi].float() * SM_SCALE, keys)
        limit = req.kv_lens[r] - (hi - lo) + 1 + torch.arange(hi - lo, device=inputs.device)
        scores.masked_fill_((tok[None, :] >= limit[:, None])[:, None, :], float("-inf"))
        direct = torch.logsumexp(scores, -1) / math.log(2)
        assert float((lse[lo:hi] - direct).abs().max()) < 1e-3
        weights = torch.softmax(scores, -1)
        assert relative_error(out[lo:hi], torch.einsum("shc,cd->shd", weights, keys[:, :512])) < 1e-4
