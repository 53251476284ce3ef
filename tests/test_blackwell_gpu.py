"""On an H200: every Blackwell backend's prepare and run reaches flashinfer and ends in flashinfer's own refusal.

traceattr refuses a Blackwell arm on sm_90 before any call (``needs sm_100, …``), so nothing of the
arm's own code would ever run here. With ``TRACEATTR_SKIP_ARCH_CHECK=1`` that one check is skipped:
the runner builds the inputs, prepares the call (the keywords, views, dtypes a B200 run would use)
and runs it, and flashinfer itself refuses the sm_90 device. The test asserts that the refusal is
flashinfer's — raised inside the flashinfer package with its message — and not a ``TypeError``,
``AttributeError`` or an error of traceattr's, and that the message is the arm's one-line reason in
runner.json. Rows: ``q8_ctx131k_h12`` (H = 12, cake's fp8 Kimi-K3 route: cake takes bf16 only at
H ∈ {64, 128}) and ``q8_ctx131k_h64_dcp8`` (a DCP row: the rank's call with its LSE, then the merge;
H = 64 so that cake's TRT-LLM-style route has a kernel for it): on cute-dsl flashinfer's own DCP path
(``dcp_path: "flashinfer dcp"``, tests/test_blackwell_dcp_gpu.py), on cake the emulation.

The lent H200 has no network: ``FLASHINFER_NO_DOWNLOAD=1`` makes flashinfer's cubin loader refuse at
once instead of retrying a download for a minute (trtllm-gen's cubins are fetched at first use).
Set ``TRACEATTR_EVIDENCE`` to a folder to keep each row's runner.json there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import traceback
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

from traceattr.core.shapes import parse_shape  # noqa: E402

H12 = "q8_ctx131k_h12"
DCP8 = "q8_ctx131k_h64_dcp8"
ARMS = ("trtllm-gen", "cute-dsl", "cake", "cake[kv=fp8]")
CUTE_ARCH = r"^ValueError: cute-dsl backend \(MLA decode kernel\) requires SM100\+, got SM90$"
CAKE_TRTLLM_ARCH = r"^RuntimeError: TRT-LLM MLA Blackwell requires compute capability 10\.0 or 10\.3, got 9\.0$"
CAKE_KIMI_ARCH = (
    r"^ValueError: CAKE Kimi-K3 MLA kernel '\w+' is not generated for sm_90a \(supported: sm_100a, sm_103a\)$"
)
# flashinfer 0.7.2 has no sm_90 check on trtllm-gen's dense decode: its first refusal is the cubin loader's
# (the path in the message can push "FLASHINFER_NO_DOWNLOAD is set" past the reason's 300 characters)
TRTLLM_NO_CUBIN = r"^RuntimeError: Artifact not found locally: "
# (row, arm) -> (status, the reason's pattern); "failed" rows are flashinfer's refusals, "unavailable" traceattr's
EXPECTED: dict[tuple[str, str], tuple[str, str]] = {
    (H12, "trtllm-gen"): ("failed", TRTLLM_NO_CUBIN),
    (H12, "cute-dsl"): ("failed", CUTE_ARCH),
    (H12, "cake"): ("unavailable", r"^12 heads with bf16 KV not supported"),
    (H12, "cake[kv=fp8]"): ("failed", CAKE_KIMI_ARCH),
    (DCP8, "trtllm-gen"): ("unavailable", r"^DCP: cute-dsl only — trtllm's decode kernel doesn't implement DCP$"),
    (DCP8, "cute-dsl"): ("failed", CUTE_ARCH),
    (DCP8, "cake"): ("failed", CAKE_TRTLLM_ARCH),
    (DCP8, "cake[kv=fp8]"): ("failed", CAKE_TRTLLM_ARCH),
}


def _runner_json(shape_name: str, folder: Path) -> dict[str, Any]:
    from traceattr.runner.loop import main
    from traceattr.runner.plan import RunPlan

    shape = parse_shape(shape_name)
    plan = RunPlan(shapes=(shape.name,), arms=ARMS, iters=1, warmup=1, capture_range=False)
    (folder / "plan.json").write_text(json.dumps(plan.to_json()), encoding="utf-8")
    main([str(folder / "plan.json"), str(folder)])
    path = folder / plan.results
    if os.environ.get("TRACEATTR_EVIDENCE"):
        keep = Path(os.environ["TRACEATTR_EVIDENCE"])
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, keep / f"runner_{shape_name}.json")
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.usefixtures("hopper")
@pytest.mark.parametrize("shape_name", [H12, DCP8])
def test_blackwell_arms_end_in_flashinfers_refusal(shape_name: str, tmp_path: Path) -> None:
    runner = _runner_json(shape_name, tmp_path)
    assert runner["timed"] is False  # nothing ran on sm_90, so nothing was timed
    (entries,) = runner["shapes"].values()
    for arm in ARMS:
        entry = entries["backends"][arm]
        status, pattern = EXPECTED[(shape_name, arm)]
        reason = entry.get("reason", "")
        print(f"{shape_name} {arm}: {entry['status']}: {reason}")
        assert "\n" not in reason
        assert not reason.startswith(("TypeError", "AttributeError", "KeyError", "NameError")), reason
        assert entry["status"] == status and re.search(pattern, reason), (arm, entry["status"], reason)
        if status != "unavailable" and parse_shape(shape_name).dcp > 1:  # which DCP path the run folder says
            assert entry["dcp_path"] == ("flashinfer dcp" if arm == "cute-dsl" else "emulated"), (arm, entry)


@pytest.mark.usefixtures("hopper")
@pytest.mark.parametrize(("shape_name", "text"), [(s, a) for (s, a), (st, _) in EXPECTED.items() if st == "failed"])
def test_the_refusal_is_raised_inside_flashinfer(shape_name: str, text: str) -> None:
    """Not merely a matching message: the exception's innermost frame is flashinfer's own code."""
    from traceattr.backends.arms import parse_arm
    from traceattr.runner.loop import ShapeInputs, check_output, prepare_arm
    from traceattr.runner.plan import RunPlan

    shape = parse_shape(shape_name)
    plan = RunPlan(shapes=(shape.name,), arms=(text,))
    data = ShapeInputs(shape, plan)
    arm = parse_arm(text)
    with pytest.raises(Exception) as info:  # which type it is, is what the asserts below check
        call, inputs = prepare_arm(arm, shape, data, plan.seed)
        check_output(arm, shape, call, inputs, data, plan, {})
    innermost = traceback.extract_tb(info.value.__traceback__)[-1]
    assert f"{os.sep}flashinfer{os.sep}" in innermost.filename, (innermost.filename, innermost.name, info.value)
    assert not isinstance(info.value, (TypeError, AttributeError)), info.value
    # and traceattr's own part ran: the call was prepared (prepare_arm returned) before flashinfer refused
    frames = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert "run" in frames or "prepare_dcp" in frames, frames
