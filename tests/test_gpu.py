"""On a CUDA GPU: every available backend agrees with the torch reference, and
``traceattr profile`` captures, attributes and summarises a real run.

Skipped without a GPU (marker ``gpu``). On the H200: fa2, fa3, fa3-per-token,
FlashMLA; Blackwell backends must report themselves unavailable.
"""

from __future__ import annotations

import json
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
from traceattr.backends.reference import mla_reference, relative_error  # noqa: E402
from traceattr.errors import BackendUnsupported  # noqa: E402
from traceattr.shapes import parse_shape  # noqa: E402

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
    assert summary.filter(pl.col("backend") == "fa3")["reduce_us"].item() == 0
    if "flashmla" in backends:  # split + combine: the reduce is its own kernel
        assert summary.filter(pl.col("backend") == "flashmla")["reduce_us"].item() > 0
    # CUDA events recorded around each call bracket its GPU span (they add the launch
    # overhead, which dominates calls this small, so only the lower bound is tight)
    assert (summary["event_vs_span"] > -0.05).all()
    assert "trtllm-gen" in out.stdout and "needs sm_10" in out.stdout
