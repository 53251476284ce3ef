"""Helpers shared by the test modules (no test module imports another): fixture data, the CLI as a
subprocess, and the synthetic captures several modules build (ranks, FlashMLA vs fa3, round captures)."""

from __future__ import annotations

import json
import lzma
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import warnings
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from tests.synth.builder import TraceBuilder
from traceattr.analysis.calls import calls as call_table
from traceattr.analysis.rounds import Capture, Row
from traceattr.attribution.engine import attribute
from traceattr.cli import main
from traceattr.core.callnames import DOMAIN, CallName
from traceattr.core.progress import Progress
from traceattr.core.protocol import SWEEP as SWEEP_PROTOCOL
from traceattr.core.records import RunnerRecord
from traceattr.core.shapes import parse_shape
from traceattr.jobs.round import RoundPlan
from traceattr.jobs.sweep import SweepPlan
from traceattr.runner.plan import arm_letters, iteration_order
from traceattr.trace.loader import load_trace

# ---------------------------------------------------------------- the real exports in tests/data
DATA = Path(__file__).parent / "data"
FIXTURES = sorted(p.name for p in DATA.iterdir() if p.is_dir() and any(p.glob("*.sqlite.xz")))  # exports, not reports


def golden(name: str, report: str) -> pl.DataFrame | None:
    """nsys's own CSV for *report* on fixture *name* (``.csv``, or ``.csv.xz`` where it is large); None when
    nsys skipped it."""
    path = DATA / name / f"nsys_{report}.csv"
    text = path.read_bytes() if path.is_file() else lzma.decompress(path.with_suffix(".csv.xz").read_bytes())
    if not text:
        return None
    header = text.split(b"\n", 1)[0].decode()
    types = {"ParentId": pl.Int64, "Lvl": pl.Int64, "RangeId": pl.Int64, "Name": pl.String}
    return pl.read_csv(text, infer_schema_length=None, schema_overrides={k: v for k, v in types.items() if k in header})


def raw_report(folder: Path) -> Path:
    """``folder/x.nsys-rep`` holding a stand-in capture (for an nsys stand-in to 'export')."""
    folder.mkdir(parents=True, exist_ok=True)
    rep = folder / "x.nsys-rep"
    rep.write_bytes(b"raw capture")
    return rep


# ---------------------------------------------------------------- the command line
def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "traceattr", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        check=False,
    )


# ---------------------------------------------------------------- many reports: one rank's report
ATTENTION = "void flashinfer::mla::hopper::BatchMLAPageAttentionHopperKernel<int>(T2)"
NCCL = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
MERGE = "void flashinfer::MergeStatesKernel<8u, 16u, 8u, 4u, __nv_bfloat16, __nv_bfloat16>(T5 *, float *)"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def rank_trace(path: Path, attention_ns: list[int], *, merge_ns: int = 3_000) -> Path:
    """One rank's report: per step an `attention` range (one kernel of the given length), an all-gather, a merge."""
    b = TraceBuilder()
    dom = b.domain("dcp", tid=1)
    t = 1_000
    for step, dur in enumerate(attention_ns):
        b.push_range(tid=1, start=t, end=t + 100, message="attention", domain=dom)
        b.launch(tid=1, start=t + 10, end=t + 20, kernel=ATTENTION, gpu_start=t + 50, gpu_end=t + 50 + dur)
        t += 50 + dur
        b.push_range(tid=1, start=t, end=t + 100, message="gather", domain=dom)
        b.launch(tid=1, start=t + 10, end=t + 20, kernel=NCCL, gpu_start=t + 50, gpu_end=t + 2_050)
        t += 2_100
        b.push_range(tid=1, start=t, end=t + 100, message=f"merge {step}", domain=dom)
        b.launch(tid=1, start=t + 10, end=t + 20, kernel=MERGE, gpu_start=t + 50, gpu_end=t + 50 + merge_ns)
        t += 100 + merge_ns
    return b.write(path, gpu_name="NVIDIA H200")


# ---------------------------------------------------------------- the HTML report: the example, FlashMLA vs fa3
EXAMPLE = Path(__file__).parents[1] / "examples" / "traces" / "h200_mla_fa2_fa3.sqlite"


PLOTS = ("fig-context", "fig-attribution", "fig-distributions", "fig-timeline")  # page order


SPLIT = (
    "void legacy::sm90::decode::dense::flash_fwd_splitkv_mla_kernel<cutlass::bfloat16_t, 64, 64>(DenseAttnDecodeParams)"
)


COMBINE = (
    "void legacy::smxx::decode::flash_fwd_mla_combine_kernel<cutlass::bfloat16_t, 512, 8, 64, 256>(DecodingParams)"
)


METADATA = "void get_mla_metadata_kernel(GetDecodingMetadataParams)"


FA3 = "void flashinfer::mla::hopper::BatchMLAPageAttentionHopperKernel<true, 64, 512>(Params)"


EVIL_KERNEL = "void evil<script>alert(1)</script>()"


EVIL_RANGE = "<script>x</script>"  # in domain traceattr: the range traceattr:<script>x</script>


# µs per kernel: FlashMLA (metadata, split, combine) and fa3's one kernel. FlashMLA wins at 128k, fa3 at 900k.
TIMES = {"q8_ctx128k": ((3, 60, 5), 80), "q8_ctx900k": ((3, 450, 8), 430)}


ITERS = 5


def flashmla_export(path: Path) -> Path:
    """FlashMLA (schedule + split + combine, 1 µs apart) vs fa3 (one kernel) at two ctx, traceattr's naming.

    FlashMLA's iteration 0 at 128k also runs the hostile kernel inside the hostile nested range.
    """
    b = TraceBuilder()
    dom = b.domain("traceattr", tid=1)
    t = 1_000_000
    for shape, (mla, fa3) in TIMES.items():
        for it in range(ITERS):
            for backend in ("flashmla", "fa3"):
                message = f"backend={backend} shape={shape} arm=A iter={it}"
                b.push_range(tid=1, start=t, end=t + 8_000, message=message, domain=dom)
                kernels = (
                    [(METADATA, mla[0]), (SPLIT, mla[1]), (COMBINE, mla[2])] if backend == "flashmla" else [(FA3, fa3)]
                )
                gpu = t + 20_000
                for k, (name, dur_us) in enumerate(kernels):
                    cpu = t + 1_000 * (k + 1)
                    end = gpu + 1_000 * dur_us + (100 * it if name in (SPLIT, FA3) else 0)  # a little drift
                    b.launch(tid=1, start=cpu, end=cpu + 500, kernel=name, gpu_start=gpu, gpu_end=end)
                    gpu = end + 1_000
                if backend == "flashmla" and shape == "q8_ctx128k" and it == 0:
                    b.push_range(tid=1, start=t + 5_000, end=t + 7_000, message=EVIL_RANGE, domain=dom)
                    b.launch(tid=1, start=t + 5_500, end=t + 6_000, kernel=EVIL_KERNEL, gpu_start=gpu,
                             gpu_end=gpu + 2_000)  # fmt: skip
                t = gpu + 50_000
    return b.write(path, gpu_name="NVIDIA H200", cc=(9, 0))


# ---------------------------------------------------------------- rounds: captures as the runner writes them
BASE, CAND = "fa3", "fa3[splits=4]"


ROWS = (Row("q1_ctx8k", parse_shape("q1_ctx8k").name), Row("q8_ctx32k", parse_shape("q8_ctx32k").name))


US = 1000  # ns per µs


# time of one call in ns: (shape, arm, iteration, position in its pair: 0 = ran first)
Timing = Callable[[str, str, int, int], float]


def timing(ratio: float = 1.0, first_bias: float = 0.0, noise: float = 0.002, seed: int = 0) -> Timing:
    """Baseline 100 µs (200 µs on the second row), candidate ×ratio; the arm that runs first ×(1 − first_bias)."""
    rng = np.random.default_rng(seed)

    def t(shape: str, arm: str, _i: int, pos: int) -> float:
        base = 100 * US if shape == ROWS[0].shape else 200 * US
        scale = ratio if arm == CAND else 1.0
        return base * scale * (1 - first_bias if pos == 0 else 1.0) * (1 + noise * rng.standard_normal())

    return t


def runner_json(
    arms: tuple[str, ...],
    *,
    fraction: float | None = 0.95,
    program: tuple[str | None, str | None] = ("fa3", "fa3"),
    sha: tuple[str | None, str | None] = ("ab" * 32, "ab" * 32),
    status: dict[str, str] | None = None,
    hold: dict[str, Any] | None = None,
    rows: tuple[Row, ...] = ROWS,
) -> dict[str, Any]:
    """A runner.json as the arms runner writes it (the agreed contract), for *rows*; *hold*: each shape's."""
    clocks = None if fraction is None else {"sm_clock_mhz_median": round(1980 * fraction), "sm_clock_max_mhz": 1980,
                                            "fraction": fraction}  # fmt: skip
    shapes = {}
    for row in rows:
        backends = {}
        for arm in arms:
            st = (status or {}).get(arm, "ok")
            entry: dict[str, Any] = {"status": st, "relative_error": 0.004}
            if st != "ok":
                entry["reason"] = "split-KV needs ctx ≥ 16k"
            digest = sha[0] if arm == BASE else sha[1]
            if digest is not None:
                entry["output_sha256"] = digest
            backends[arm] = entry
        shapes[row.shape] = {"backends": backends, **({"clocks": clocks} if clocks else {}),
                             **({"hold": hold} if hold else {})}  # fmt: skip
    arms_info = {BASE: {"backend": "fa3", "options": {}, "program": program[0]},
                 CAND: {"backend": "fa3", "options": {"splits": 4}, "program": program[1]}}  # fmt: skip
    return {"gpu": {"name": "NVIDIA H200"}, "shapes": shapes, "arms": arms_info, "timed": True,
            "protocol": {"between": "flush", "order": "abba", "flush_bytes": 256 << 20}}  # fmt: skip


def synth_capture(
    path: Path, index: int, arms: tuple[str, ...], t: Timing, *, iters: int = 8, order: str = "abba",
    skip: set[str] = frozenset(), name: str | None = None, shapes: tuple[str, ...] | None = None,
    gaps: Callable[[str, str, int], int] | None = None, rows: tuple[Row, ...] = ROWS, **runner: Any,
) -> Capture:  # fmt: skip
    """A trace as the runner writes it: per row, *iters* iterations of the arms in ABBA (or blocked) order.

    *shapes*: the rows asked for (default every row); *gaps*: ns of GPU idle inside a call, per (shape, arm,
    iteration): the call is then two kernels with that gap between them, launched as the host got to them
    (no queue wait: host-bound).
    """
    b = TraceBuilder()
    dom = b.domain(DOMAIN, tid=1)
    letters = arm_letters(arms)
    now = 10_000
    for row in rows:
        if shapes is not None and row.shape not in shapes:
            continue
        if order == "abba":
            sequence = [(i, arm) for i in range(iters) for arm in iteration_order(arms, i)]
        else:
            sequence = [(i, arm) for arm in arms for i in range(iters)]
        for n, (i, arm) in enumerate(sequence):
            if arm in skip:
                continue
            pos = n % 2 if order == "abba" else 0
            dur = int(t(row.shape, arm, i, pos))
            b.push_range(tid=1, start=now, end=now + 5_000, message=CallName(arm, row.shape, letters[arm], i).message,
                         domain=dom)  # fmt: skip
            gap = gaps(row.shape, arm, i) if gaps else 0
            if not gap:
                b.launch(tid=1, start=now + 100, end=now + 200, kernel="mla_decode_kernel", gpu_start=now + 1_000,
                         gpu_end=now + 1_000 + dur)  # fmt: skip
            else:  # the split kernel, then the merge launched only after the gap (the host was late)
                half = dur // 2
                b.launch(tid=1, start=now + 100, end=now + 200, kernel="mla_decode_kernel", gpu_start=now + 1_000,
                         gpu_end=now + 1_000 + half)  # fmt: skip
                b.launch(tid=1, start=now + 300, end=now + 400, kernel="merge_states_kernel",
                         gpu_start=now + 1_000 + half + gap, gpu_end=now + 1_000 + dur + gap)  # fmt: skip
                dur += gap
            now += dur + 20_000
    trace = b.write(path / (name or f"capture{index}_{order}.sqlite"), gpu_name="NVIDIA H200", cc=(9, 0))
    att = attribute(load_trace(trace))
    status = {a: "unavailable" for a in skip}
    runner_record = RunnerRecord.from_json(runner_json(arms, status=status, rows=rows, **runner))
    return Capture(index, call_table(att), runner_record, str(path), order, attribution=att)


def captures(path: Path, t: Timing, count: int = 3, **kw: Any) -> list[Capture]:
    return [synth_capture(path, r, (BASE, CAND) if r % 2 == 0 else (CAND, BASE), t, **kw) for r in range(count)]


# -- orchestration with a fake executor, retry, receipts ---------------------------------------
class FakeExecutor:
    """Stands in for profile_executor: synthesises each requested capture; records what was asked."""

    def __init__(self, tmp: Path, t: Timing, **runner: Any) -> None:
        self.tmp, self.t, self.runner, self.requests = tmp, t, runner, []

    def __call__(self, request, plan, on_line):  # type: ignore[no-untyped-def]
        self.requests.append(request)
        request.folder.mkdir(parents=True)
        for shape in request.shapes:
            on_line(Progress.timing_of(shape, f"2 arms × {plan.protocol.iters} iterations").line)
        return synth_capture(request.folder, request.index, request.arms, self.t, order=request.order,
                             shapes=request.shapes, **self.runner)  # fmt: skip


# -- hostile inputs: mutated copies of the example sweep, one-line refusals ---------------------------

SWEEP = Path(__file__).parents[1] / "examples" / "traces" / "h200_mla_sweep.sqlite"


def mutate(tmp_path: Path, sql: str, name: str = "m.sqlite", source: Path = SWEEP) -> Path:
    """A copy of *source* changed by *sql* (the input itself is never touched)."""
    path = tmp_path / name
    shutil.copyfile(source, path)
    with sqlite3.connect(path) as conn:
        conn.executescript(sql)
    conn.close()
    return path


def cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    """The command line in this process: (exit status, stdout, stderr)."""
    shown = warnings.showwarning
    try:
        with pytest.raises(SystemExit) as exc:
            main([str(a) for a in args])
    finally:
        warnings.showwarning = shown
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def one_line(rc: int, err: str, *needles: str) -> str:
    """Exit status 2 and one line on stderr holding every needle, never a traceback."""
    lines = err.strip().splitlines()
    assert rc == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# ---------------------------------------------------------------- traceattr sweep: a sweep through a fake executor
CROSS = 183_333  # fa3 25 + 0.45 µs per 1k ctx, flashmla 36 + 0.39: equal at 11 / 0.06 k


def linear_time(shape: str, arm: str) -> float:
    """µs of one call: the two lines above (fa2 slower everywhere)."""
    k = ctx_of(shape) / 1000
    return {"fa3": 25 + 0.45 * k, "flashmla": 36 + 0.39 * k, "fa2": 30 + 1.0 * k}[arm]


def ctx_of(shape: str) -> int:
    return parse_shape(shape).ctx


def sweep_capture(
    folder: Path, request: Any, t: Any, iters: int, seed: int, fraction: float = 0.95, low: tuple[str, ...] = ()
) -> Capture:
    """A capture of the requested shapes and arms, ABBA, each call t(shape, arm) µs with 0.2% noise; the
    shapes in *low* ran at half the SM clock (the clock gate refuses them)."""
    rng = np.random.default_rng(seed)
    b = TraceBuilder()
    dom = b.domain(DOMAIN, tid=1)
    letters = arm_letters(request.arms)
    now = 10_000
    for shape in request.shapes:
        for i in range(iters):
            for arm in iteration_order(request.arms, i):
                dur = int(1000 * t(shape, arm) * (1 + 0.002 * rng.standard_normal()))
                b.push_range(tid=1, start=now, end=now + 5_000, message=CallName(arm, shape, letters[arm], i).message,
                             domain=dom)  # fmt: skip
                b.launch(tid=1, start=now + 100, end=now + 200, kernel="mla_decode_kernel", gpu_start=now + 1_000,
                         gpu_end=now + 1_000 + dur)  # fmt: skip
                now += dur + 20_000
    trace = b.write(folder / "trace.sqlite", gpu_name="NVIDIA H200", cc=(9, 0))
    att = attribute(load_trace(trace))

    def clocks(shape: str) -> dict[str, Any]:
        f = 0.5 if shape in low else fraction
        return {"sm_clock_mhz_median": round(1980 * f), "sm_clock_max_mhz": 1980, "fraction": f}

    runner = {
        "gpu": {"name": "NVIDIA H200"}, "timed": True,
        "shapes": {s: {"backends": {a: {"status": "ok", "relative_error": 0.004} for a in request.arms},
                       "clocks": clocks(s)} for s in request.shapes},
        "arms": {a: {"backend": a, "options": {}, "program": a} for a in request.arms},
        "protocol": {"between": "flush", "order": "abba", "flush_bytes": 256 << 20},
    }  # fmt: skip
    return Capture(request.index, call_table(att), RunnerRecord.from_json(runner), str(folder), "abba", attribution=att)


class FakeSweep:
    """Stands in for profile_executor in a ``traceattr sweep``: synthesises each step's capture with timing *t*; records the requests."""

    def __init__(
        self,
        t: Any,
        iters: int = 12,
        low_clock_steps: tuple[int, ...] = (),
        low_clock: tuple[tuple[int, int], ...] = (),
    ) -> None:
        self.t, self.iters, self.requests, self.low = t, iters, [], low_clock_steps
        self.low_at = low_clock  # (step, ctx): that one point ran at a low clock

    def __call__(self, request, plan, on_line):  # type: ignore[no-untyped-def]
        self.requests.append(request)
        request.folder.mkdir(parents=True)
        fraction = 0.5 if len(self.requests) in self.low else 0.95
        step = len(self.requests)
        low = tuple(s for s in request.shapes if (step, ctx_of(s)) in self.low_at)
        return sweep_capture(request.folder, request, self.t, self.iters, step, fraction, low)


def sweep_plan(tmp: Path, **kw: Any) -> SweepPlan:
    """A sweep of q8_ctx* over 8k–1m; *kw*: the plan's fields, or the protocol's (``graphs=True``)."""
    base = {"family": "q8_ctx*", "arms": ("fa3", "flashmla"), "ctx_low": 8000, "ctx_high": 1_000_000,
            "folder": tmp / "sweep", "width": 0.1, "max_steps": 10}  # fmt: skip
    own, protocol = _split_protocol({**base, **kw}, SweepPlan)
    return SweepPlan(**own, protocol=replace(SWEEP_PROTOCOL, **protocol))


def round_plan(**kw: Any) -> RoundPlan:
    """A RoundPlan from its fields and the protocol's (``max_noise=0.005``, ``hold=False``), changed from the
    plan's own default protocol."""
    own, protocol = _split_protocol(kw, RoundPlan)
    default = RoundPlan(**{k: v for k, v in own.items() if k != "protocol"}).protocol
    hold = protocol.pop("hold", default.hold)
    return RoundPlan(**own, protocol=replace(default, **protocol).held(hold))


def _split_protocol(kw: dict[str, Any], record: type) -> tuple[dict[str, Any], dict[str, Any]]:
    own = {f.name for f in fields(record)}
    return {k: v for k, v in kw.items() if k in own}, {k: v for k, v in kw.items() if k not in own}


# ---------------------------------------------------------------- reading a report page back
def page_figures(page: str) -> dict[str, dict]:
    """Every figure the page draws, parsed from its ``Plotly.newPlot(id, data, layout, config)`` call.

    Read as JSON (not matched as text): plotly's serializers differ in how they
    escape non-ASCII text and lay out the call, between versions and with or
    without orjson.
    """
    ours = without_plotlyjs(page)
    decoder = json.JSONDecoder()
    figures = {}
    for match in re.finditer(r"Plotly\.newPlot\(", ours):
        args, pos = [], match.end()
        for _ in range(3):  # the div id, the data, the layout
            pos = re.compile(r"[\s,]*").match(ours, pos).end()
            value, pos = decoder.raw_decode(ours, pos)
            args.append(value)
        div, data, layout = args
        figures[div] = {"data": data, "layout": layout}
    return figures


def json_strings(value: object) -> list[str]:
    """Every string inside a parsed JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in json_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in json_strings(v)]
    return []


def without_plotlyjs(page: str) -> str:
    """The page minus the embedded plotly.js bundle (its licence comments name web sites); a figure's own
    ``<div>`` (style.figure_html) as it is."""
    if "<html" not in page:
        return page
    start = page.index("/**\n* plotly.js v")
    end = page.index("</script>", start)
    return page[:start] + page[end:]


def sweep(path: Path, times: dict[str, dict[str, float]], iters: int = 12, seed: int = 0) -> Path:
    """A sweep trace: per shape, *iters* ABBA calls of each backend of ``times[shape]`` (µs, 0.2% noise)."""
    rng = np.random.default_rng(seed)
    b = TraceBuilder()
    dom = b.domain(DOMAIN, tid=1)
    now = 10_000
    for shape, per in times.items():
        arms = tuple(per)
        for i in range(iters):
            for arm in arms if i % 2 == 0 else arms[::-1]:
                dur = int(1000 * per[arm] * (1 + 0.002 * rng.standard_normal()))
                b.push_range(tid=1, start=now, end=now + 5_000, message=CallName(arm, shape, "A", i).message,
                             domain=dom)  # fmt: skip
                b.launch(tid=1, start=now + 100, end=now + 200, kernel="mla_decode_kernel", gpu_start=now + 1_000,
                         gpu_end=now + 1_000 + dur)  # fmt: skip
                now += dur + 20_000
    return b.write(path, gpu_name="NVIDIA H200", cc=(9, 0))


# ---------------------------------------------------------------- traceattr round on CPU, as the CLI runs it
def faked_round(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``traceattr round`` run on CPU (each capture a synthetic trace, the candidate 10% faster): its folder."""
    import traceattr.jobs.profile as profile

    count = []

    def fake_execute(plan, on_line=None, *, report=True):  # type: ignore[no-untyped-def]
        count.append(plan)
        plan.folder.mkdir(parents=True)
        for shape in plan.run.shapes:
            on_line(Progress.timing_of(shape, f"2 arms × {plan.run.iters} calls").line)
        cap = synth_capture(plan.folder, len(count) - 1, plan.backends, timing(0.9, seed=len(count)),
                            order=plan.run.order, name="trace.sqlite")  # fmt: skip
        return profile.ProfileResult(plan.folder, cap.attribution, cap.calls, pl.DataFrame(), cap.runner, ())  # type: ignore[arg-type]

    monkeypatch.setattr(profile, "execute", fake_execute)
    monkeypatch.setattr(profile, "require_runnable", lambda plan: None)
    with pytest.raises(SystemExit) as done:
        main(["round", "--rows", "smoke", "--baseline", BASE, "--candidate", CAND, "--iters", "8",
              "--out-root", str(tmp_path)])  # fmt: skip
    assert done.value.code in (0, None)
    (folder,) = (p for p in tmp_path.iterdir() if p.is_dir())
    return folder
