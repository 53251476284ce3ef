"""traceattr.runner.loop on CPU: the runner's control flow (checks, predecessor, holds, the stopping rule, what
runner.json holds) with torch, nvtx, triton and the GPU-side modules replaced by stand-ins.

The stand-ins do nothing on a GPU; they let the loop run, so runner.json's structure and the order of
its keys are checked here, and ``test_the_split_loop_writes_what_the_one_function_wrote`` compares the
loop with its single-function form at 427b1f4 (read from git; skipped where that commit is absent).
The real thing runs in tests/test_gpu.py on a GPU.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from traceattr.core.records import RunPlan

HERE = Path(__file__).parent
ONE_FUNCTION = "427b1f4"  # the loop as one 172-line function, before it was split into steps


class _Tensor:
    def __init__(self, data: bytes = b"\0" * 8) -> None:
        self.data = data

    def detach(self) -> _Tensor:
        return self

    def contiguous(self) -> _Tensor:
        return self

    def view(self, _dtype: Any) -> _Tensor:
        return self

    def cpu(self) -> _Tensor:
        return self

    def numpy(self) -> _Tensor:
        return self

    def tobytes(self) -> bytes:
        return self.data


class _Event:
    clock: ClassVar[list[float]] = [0.0]

    def __init__(self, enable_timing: bool = False) -> None:
        self.at = 0.0

    def record(self) -> None:
        _Event.clock[0] += 0.0125  # ms: every call 12.5 µs, deterministic
        self.at = _Event.clock[0]

    def elapsed_time(self, other: _Event) -> float:
        return other.at - self.at


def _fake_torch() -> types.ModuleType:
    torch = types.ModuleType("torch")
    cuda = types.SimpleNamespace(
        synchronize=lambda: None, Event=_Event, Stream=lambda: types.SimpleNamespace(wait_stream=lambda s: None),
        current_stream=lambda: types.SimpleNamespace(wait_stream=lambda s: None),
        stream=lambda s: contextlib.nullcontext(), CUDAGraph=lambda: None, graph=lambda g: contextlib.nullcontext(),
        profiler=types.SimpleNamespace(start=lambda: None, stop=lambda: None),
    )  # fmt: skip
    torch.cuda = cuda  # type: ignore[attr-defined]
    torch.uint8 = "uint8"  # type: ignore[attr-defined]
    torch.Tensor = _Tensor  # type: ignore[attr-defined]
    return torch


class _Sampler:
    def __enter__(self) -> _Sampler:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def sample(self) -> None:
        return None

    def window(self, *_: object) -> dict[str, Any]:
        return {"samples": 2, "fraction": 0.95}

    def summary(self, _max: object) -> dict[str, Any]:
        return {"samples": 4}


class _HoldLog:
    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.groups = 0

    @classmethod
    def empty(cls) -> _HoldLog:
        return cls()

    def add_call(self, name: str, _ns: int) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def add(self, _released: object) -> None:
        self.groups += 1

    def summary(self) -> dict[str, Any]:
        return {"groups": self.groups, "calls": dict(self.calls)}


class _HostHold:
    """Times out on the groups listed (to reach the 'twice running' branch)."""

    timeouts: tuple[int, ...] = ()

    def __init__(self, _timeout: float) -> None:
        self.n = 0

    def hold(self) -> None:
        self.n += 1

    def release(self) -> None:
        return None

    def result(self) -> Any:
        return types.SimpleNamespace(timed_out=self.n in self.timeouts)


def _stub(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    for key, value in attrs.items():
        setattr(module, key, value)
    return module


@contextlib.contextmanager
def _stand_ins() -> Iterator[None]:
    """torch, nvtx and triton, and the runner's GPU-side modules, replaced while the loop modules import."""
    stubs = {
        "torch": _fake_torch(),
        "nvtx": _stub("nvtx", annotate=lambda *a, **k: contextlib.nullcontext()),
        "traceattr.backends.dcp": _stub("traceattr.backends.dcp", DcpCall=type("DcpCall", (), {}), prepare_dcp=None,
                                        dcp_path=None),
        "traceattr.backends.inputs": _stub("traceattr.backends.inputs", as_shape=lambda base, shape: base,
                                           build_inputs=lambda shape, **k: _Inputs(shape)),
        "traceattr.backends.reference": _stub(
            "traceattr.backends.reference", LSE_LIMIT={}, lse_error=None, merge_reference=None,
            mla_reference_lse=lambda inputs, requests, scale: (_Tensor(), _Tensor()),
            relative_error=lambda rows, ref: 0.001),
        "traceattr.runner.environment": _stub("traceattr.runner.environment", ClockSampler=_Sampler,
                                              gpu_facts=lambda: {"name": "stand-in", "max_sm_clock_mhz": 1980},
                                              versions=lambda: {"torch": "stand-in"}),
        "traceattr.runner.flush": _stub("traceattr.runner.flush", Flush=lambda size, kind: types.SimpleNamespace(
            run=lambda: None)),
        "traceattr.runner.hold": _stub("traceattr.runner.hold", DEFAULT_TIMEOUT_S=2.0, HoldLog=_HoldLog,
                                       HostHold=_HostHold),
    }  # fmt: skip
    saved = {name: sys.modules.get(name) for name in [*stubs, "traceattr.runner.loop", "runner_loop_427b1f4"]}
    sys.modules.update(stubs)
    sys.modules.pop("traceattr.runner.loop", None)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


class _Inputs:
    def __init__(self, shape: Any) -> None:
        self.shape = shape
        self.layout = types.SimpleNamespace(requests=lambda: [])

    def kv_bytes(self) -> int:
        return 4096


class _Call:
    def __init__(self, label: str, fail: bool) -> None:
        self.label, self.fail = label, fail

    def run(self) -> _Tensor:
        if self.fail:
            raise RuntimeError(f"{self.label} broke")
        return _Tensor(self.label.encode())

    def output_rows(self, out: _Tensor) -> _Tensor:
        return out


def _load(module_name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _run(loop: Any, plan: RunPlan, monkeypatch: pytest.MonkeyPatch, *, broken: str = "",
         unavailable: str = "", wrong: str = "") -> dict[str, Any]:  # fmt: skip
    from traceattr.core.errors import BackendUnsupported

    _Event.clock[0] = 0.0

    def check_arm(arm: Any, shape: Any, device: Any) -> Any:
        if arm.label == unavailable:
            raise BackendUnsupported(f"{arm.label}: not on this stand-in")
        return types.SimpleNamespace(notes=("stand-in",))

    def backend(arm: Any) -> Any:
        return types.SimpleNamespace(prepare=lambda shape, inputs, **k: _Call(arm.label, arm.label == broken))

    errors = {wrong: 0.5} if wrong else {}
    monkeypatch.setattr(loop, "current_device", lambda: (object(), None))
    monkeypatch.setattr(loop, "check_arm", check_arm)
    monkeypatch.setattr(loop, "arm_backend", backend)
    monkeypatch.setattr(loop, "relative_error", lambda rows, ref: errors.get(rows.data.decode(), 0.001))
    monkeypatch.setattr(loop.time, "time", lambda: 1_800_000_000.0)
    results = json.loads(json.dumps(loop.run(plan, Path(".")), default=str))
    for shape in results["shapes"].values():  # a failed arm's traceback names the runner's own frames
        for entry in shape["backends"].values():
            if "traceback" in entry:
                entry["traceback"] = entry["traceback"].splitlines()[-1]  # the exception itself
    return results


PLANS = {
    "abba, noise rule": RunPlan(shapes=("q1_ctx8k",), arms=("fa3", "fa2"), iters=4, max_noise=0.001, max_iters=24),
    "blocked, held, flush+ARM": RunPlan(shapes=("q1_ctx8k", "q8_ctx32k"), arms=("fa3", "fa2", "flashmla"), iters=3,
                                        order="blocked", hold_us=100.0, between="flush+fa2", lead=False),
    "no flush": RunPlan(shapes=("q1_ctx8k",), arms=("fa3", "fa2"), iters=2, between="none", capture_range=False),
}  # fmt: skip
CASES = {"every arm runs": {}, "one breaks": {"broken": "fa2"}, "one unavailable": {"unavailable": "fa3"},
         "one wrong": {"wrong": "fa2"}}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("plan_name", sorted(PLANS))
def test_the_split_loop_writes_what_the_one_function_wrote(
    plan_name: str, case: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    plan = PLANS[plan_name]
    before = tmp_path / "loop_427b1f4.py"
    shown = subprocess.run(["git", "-C", str(HERE.parent), "show", f"{ONE_FUNCTION}:traceattr/runner/loop.py"],
                           capture_output=True, text=True, check=False)  # fmt: skip
    if shown.returncode != 0:
        pytest.skip(f"commit {ONE_FUNCTION} is not in this clone")
    # the runner's helpers were renamed since (an ABBA pass is an iteration): the old function under today's names
    renamed = shown.stdout
    for old, new in (
        ("more_rounds", "more_iterations"),  # /1 names
        ("round_order", "iteration_order"),  # /1 names
        ("{done} rounds,", "{done} iterations,"),  # /1 names: its progress line
    ):
        renamed = renamed.replace(old, new)
    before.write_text(renamed, encoding="utf-8")
    with _stand_ins():
        new = _load("traceattr.runner.loop", HERE.parent / "traceattr" / "runner" / "loop.py")
        now = _run(new, plan, monkeypatch, **CASES[case])
        said_now = capsys.readouterr().out
        old = _load("runner_loop_427b1f4", before)
        _HostHold.timeouts = ()
        then = _run(old, plan, monkeypatch, **CASES[case])
        said_then = capsys.readouterr().out
    assert json.dumps(now) == json.dumps(then)  # the same runner.json, key order included
    assert said_now == said_then  # the same progress lines


def test_a_hold_that_times_out_twice_is_dropped_for_the_shape(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    plan = RunPlan(shapes=("q1_ctx8k",), arms=("fa3", "fa2"), iters=6, hold_us=100.0, max_noise=0.5)
    with _stand_ins():
        _HostHold.timeouts = (1, 2)
        try:
            results = _run(_load("traceattr.runner.loop", HERE.parent / "traceattr" / "runner" / "loop.py"), plan,
                           monkeypatch)  # fmt: skip
        finally:
            _HostHold.timeouts = ()
    out = capsys.readouterr().out
    assert "timed out twice" in out and results["shapes"]["q1_ctx8k_h16_b1_bf16_p64"]["hold"]["groups"] == 2
    assert [e["iter"] for e in results["events"]][:4] == [0, 0, 1, 1]
