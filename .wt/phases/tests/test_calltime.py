"""Exposed time per role, launch overhead vs queue wait, stream idle time and the CUDA-event cross-check.

Against kernel and runtime rows read by hand from a real H200 export (tests/data/h200_traceattr_sweep,
``traceattr profile`` of fa3 / fa2 / FlashMLA / fa3-per-token with CUDA events in runner.json), a
synthetic trace built to overlap and queue, and a brute-force oracle over random ops.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import traceattr
from tests.helpers import DATA, FIXTURES
from tests.synth.builder import TraceBuilder
from traceattr.analysis.calls import calls
from traceattr.analysis.pipeline import with_events
from traceattr.analysis.summary import PART_COLUMNS, summarize
from traceattr.attribution.calltime import exposure
from traceattr.attribution.engine import attribute
from traceattr.attribution.roles import ROLES
from traceattr.core.records import runner_events
from traceattr.trace.loader import load_trace

SWEEP = "h200_traceattr_sweep"
SPLIT = "void legacy::sm90::decode::dense::flash_fwd_splitkv_mla_kernel<cutlass::bfloat16_t, 64, 64>(Params)"
COMBINE = "void legacy::smxx::decode::flash_fwd_mla_combine_kernel<cutlass::bfloat16_t, 512, 8, 64, 256>(Params)"
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<unsigned char>>(int, T1, T2)"
RECORD = "cudaEventRecordWithFlags_v11010"


@pytest.fixture(scope="module")
def sweep_calls(exports: dict[str, Path]) -> pl.DataFrame:
    return calls(attribute(load_trace(exports[SWEEP])))


def _call(table: pl.DataFrame, backend: str, shape: str, it: int) -> dict:
    return table.filter(
        (pl.col("backend") == backend) & (pl.col("shape") == f"q8_{shape}_h16_b1_bf16_p64") & (pl.col("iter") == it)
    ).row(0, named=True)


def _event_us(backend: str, shape: str, it: int) -> float:
    events = json.loads((DATA / SWEEP / "runner.json").read_text())["events"]
    return next(
        e["event_us"]
        for e in events
        if (e["backend"], e["shape"], e["iter"]) == (backend, f"q8_{shape}_h16_b1_bf16_p64", it)
    )


# -- a real H200 export, read by hand ------------------------------------------------------------
# sqlite3 h200_mla_sweep.sqlite "SELECT k.start, k.end, k.streamId, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
#   JOIN StringIds s ON s.id = k.shortName WHERE k.start BETWEEN … ORDER BY k.start"
# and the same for CUPTI_ACTIVITY_KIND_RUNTIME (cudaLaunch*, cudaEventRecord*) inside each call's NVTX range.
# Every kernel of the run is on device 0, context 1, stream 7.


def test_flashmla_8k_combine_overlaps_its_split(sweep_calls: pl.DataFrame) -> None:
    """flashmla q8_ctx8k iter 1 (range 16496764–16765474):
    split   flash_fwd_splitkv_mla_kernel  16680324–16698660
    combine flash_fwd_mla_combine_kernel  16692580–16716036  (starts 6,080 ns before the split ends)
    The kernel sums (18,336 + 23,456 = 41,792) exceed the 35,712 ns span; the exposed parts do not.
    """
    c = _call(sweep_calls, "flashmla", "ctx8k", 1)
    assert c["gpu_span_ns"] == 16716036 - 16680324 == 35712
    assert c["attention_sum_ns"] + c["reduce_sum_ns"] == 18336 + 23456 > c["gpu_span_ns"]
    assert c["attention_exposed_ns"] == 16692580 - 16680324 == 12256  # split alone
    assert c["overlap_ns"] == 16698660 - 16692580 == 6080  # both
    assert c["reduce_exposed_ns"] == 16716036 - 16698660 == 17376  # combine alone
    assert c["gap_ns"] == 0
    assert c["attention_exposed_ns"] + c["overlap_ns"] + c["reduce_exposed_ns"] + c["gap_ns"] == c["gpu_span_ns"]


def test_flashmla_8k_gap_and_an_idle_stream(sweep_calls: pl.DataFrame) -> None:
    """flashmla q8_ctx8k iter 0 (range 15434902–15846684), the CPU behind the GPU:
    flush   vectorized_elementwise_kernel 15403944–15444360 (the stream's previous op)
    records cudaEventRecordWithFlags 15459371–15462479, 15839578–15843269
    launch  cudaLaunchKernelExC 15703705–15722134 → split   15721959–15740231
    launch  cudaLaunchKernelExC 15729820–15740583 → combine 15742343–15757639 (2,112 ns after the split)
    runner.json: event_us 380.224
    """
    c = _call(sweep_calls, "flashmla", "ctx8k", 0)
    assert (c["attention_exposed_ns"], c["overlap_ns"], c["gap_ns"], c["reduce_exposed_ns"]) == (
        15740231 - 15721959, 0, 15742343 - 15740231, 15757639 - 15742343,
    )  # fmt: skip
    assert c["launch_latency_ns"] == 15721959 - 15703705 == 18254
    assert c["queue_wait_ns"] == 0  # the flush had ended before the launch call
    assert c["launch_overhead_ns"] == 18254
    assert c["stream_idle_before_ns"] == 15721959 - 15444360 == 277599
    # the start event is reached when recorded (the stream idle), the stop event when the CPU records it
    assert c["event_lead_ns"] == 15721959 - 15462479 == 259480
    assert c["event_tail_ns"] == 15843269 - 15757639 == 85630
    extra = round(_event_us("flashmla", "ctx8k", 0) * 1000) - c["gpu_span_ns"]
    assert extra == 344544
    assert abs(extra - c["event_lead_ns"] - c["event_tail_ns"]) <= 1_000  # accounted for to the µs


def test_fa3_8k_the_plus_337_percent(sweep_calls: pl.DataFrame) -> None:
    """fa3 q8_ctx8k iter 0 (range 14601101–15116614): a 25 µs call whose CUDA events read 398.8 µs.
    flush   14510443–14551211; records 14704734–14715110 and 15107346–15111964
    launch  cudaLaunchCooperativeKernel 15023512–15046836 → BatchMLAPageAttentionHopperKernel 15045545–15070857
    """
    c = _call(sweep_calls, "fa3", "ctx8k", 0)
    assert c["gpu_span_ns"] == 25312 and c["attention_exposed_ns"] == 25312
    assert (c["launch_overhead_ns"], c["queue_wait_ns"]) == (15045545 - 15023512, 0)
    assert c["stream_idle_before_ns"] == 15045545 - 14551211
    assert c["event_lead_ns"] == 15045545 - 14715110 == 330435
    assert c["event_tail_ns"] == 15111964 - 15070857 == 41107
    extra = round(_event_us("fa3", "ctx8k", 0) * 1000) - c["gpu_span_ns"]
    assert extra == 373504 and abs(extra - 330435 - 41107) <= 2_000


def test_flashmla_900k_queued_behind_the_flush(sweep_calls: pl.DataFrame) -> None:
    """flashmla q8_ctx900k iter 0 (range 68385558–68582392), the CPU 1 ms ahead of the GPU:
    records cudaEventRecordWithFlags 68402665–68404788, 68577439–68579753
    launch  cudaLaunchKernelExC 68497266–68506345 → split   69577311–69951838
    launch  cudaLaunchKernelExC 68509527–68516149 → combine 69948734–69967486
    flush   69534495–69574879 (the stream's previous op, still queued when the split was launched)
    runner.json: event_us 392.704
    """
    c = _call(sweep_calls, "flashmla", "ctx900k", 0)
    assert c["gpu_span_ns"] == 69967486 - 69577311
    assert c["attention_exposed_ns"] == 69948734 - 69577311
    assert c["overlap_ns"] == 69951838 - 69948734 == 3104
    assert c["reduce_exposed_ns"] == 69967486 - 69951838
    assert c["launch_latency_ns"] == 69577311 - 68497266 == 1080045  # what the report called "launch µs"
    assert c["queue_wait_ns"] == 69574879 - 68497266 == 1077613  # the stream busy with earlier work
    assert c["launch_overhead_ns"] == 69577311 - 69574879 == 2432
    assert c["stream_idle_before_ns"] == 2432
    assert (c["event_lead_ns"], c["event_tail_ns"]) == (2432, 0)  # both events were queued too
    extra = round(_event_us("flashmla", "ctx900k", 0) * 1000) - c["gpu_span_ns"]
    assert extra == 2529 and abs(extra - 2432) <= 100


def test_every_sweep_call_partitions_and_the_events_are_explained(sweep_calls: pl.DataFrame) -> None:
    parts = pl.sum_horizontal(PART_COLUMNS)
    assert sweep_calls.filter(parts != pl.col("gpu_span_ns")).height == 0
    assert (sweep_calls["launch_overhead_ns"] + sweep_calls["queue_wait_ns"] == sweep_calls["launch_latency_ns"]).all()
    assert (sweep_calls["queue_wait_ns"] >= 0).all() and (sweep_calls["launch_overhead_ns"] >= 0).all()
    summary = with_events(summarize(sweep_calls, None), sweep_calls, runner_events(DATA / SWEEP))
    # per (shape, backend), event − span is lead + tail to within a µs (median over 10 calls)
    assert summary["event_unexplained_us"].abs().max() < 1.0
    assert summary["event_minus_span_us"].max() > 150  # … of differences up to 150 µs
    shares = summary.select(pl.sum_horizontal([c for c in summary.columns if c.endswith("_share")]))
    assert ((shares.to_series() - 1).abs() < 1e-12).all()
    fa3 = summary.filter((pl.col("backend") == "fa3") & pl.col("shape").str.contains("ctx900k")).row(0, named=True)
    assert fa3["launch_latency_us"] > 1000 and fa3["queue_wait_us"] > 0.99 * fa3["launch_latency_us"]


@pytest.mark.parametrize("mode", ["nsys", "innermost"])
@pytest.mark.parametrize("name", FIXTURES)
def test_parts_add_up_on_every_fixture(exports: dict[str, Path], name: str, mode: str) -> None:
    table = calls(attribute(load_trace(exports[name]), mode=mode))  # type: ignore[arg-type]
    total = pl.sum_horizontal(PART_COLUMNS)
    assert table.filter(total != pl.col("gpu_span_ns")).height == 0
    assert table.filter(pl.any_horizontal([pl.col(c) < 0 for c in PART_COLUMNS])).height == 0
    assert (table["launch_overhead_ns"] + table["queue_wait_ns"] == table["launch_latency_ns"]).all()


# -- synthetic: overlap, queueing and CUDA events by construction -----------------------------------------
def _synthetic(path: Path) -> Path:
    """Two FlashMLA-like calls on stream 7 (ns):

    flush   kernel 2,000–9,000 (launched at 100, in range "flush")
    call A  range 800–4,000; records 900–950 and 3,000–3,050
            split 10,000–20,000 (launched at 1,000: queued 8,000 behind the flush), combine 18,000–25,000
            (overlaps 2,000), a memset on stream 8 at 27,000–30,000 after a 2,000 gap
    call B  range 40,000–60,000; records 40,100–40,200 and 50,000–50,100
            split 41,000–45,000 (launched at 40,300; stream idle since 30,000 on… stream 7 since 25,000)
    """
    b = TraceBuilder()
    dom = b.domain("traceattr", tid=1)
    b.push_range(tid=1, start=50, end=500, message="flush", domain=dom)
    b.launch(tid=1, start=100, end=200, kernel=FILL, gpu_start=2_000, gpu_end=9_000)
    b.push_range(tid=1, start=800, end=4_000, message="backend=flashmla shape=q8_ctx8k arm=A iter=0", domain=dom)
    b.api_call(tid=1, start=900, end=950, name=RECORD)
    b.launch(tid=1, start=1_000, end=1_200, kernel=SPLIT, gpu_start=10_000, gpu_end=20_000)
    b.launch(tid=1, start=2_000, end=2_200, kernel=COMBINE, gpu_start=18_000, gpu_end=25_000)
    b.memset(tid=1, start=2_500, end=2_600, gpu_start=27_000, gpu_end=30_000, nbytes=64, stream=8)
    b.api_call(tid=1, start=3_000, end=3_050, name=RECORD)
    b.push_range(tid=1, start=40_000, end=60_000, message="backend=flashmla shape=q8_ctx8k arm=A iter=1", domain=dom)
    b.api_call(tid=1, start=40_100, end=40_200, name=RECORD)
    b.launch(tid=1, start=40_300, end=40_400, kernel=SPLIT, gpu_start=41_000, gpu_end=45_000)
    b.api_call(tid=1, start=50_000, end=50_100, name=RECORD)
    return b.write(path, gpu_name="NVIDIA H200", cc=(9, 0))


@pytest.mark.parametrize("mode", ["nsys", "innermost"])
def test_synthetic_overlap_queue_and_events(tmp_path: Path, mode: str) -> None:
    att = traceattr.open(_synthetic(tmp_path / "t.sqlite")).attribute(mode=mode)
    a, b = calls(att).sort("iter").iter_rows(named=True)
    assert a["gpu_span_ns"] == 20_000
    assert (a["attention_exposed_ns"], a["overlap_ns"], a["reduce_exposed_ns"], a["gap_ns"], a["copy_exposed_ns"]) == (
        8_000, 2_000, 5_000, 2_000, 3_000,
    )  # fmt: skip
    assert a["launch_latency_ns"] == 9_000
    assert (a["queue_wait_ns"], a["launch_overhead_ns"], a["stream_idle_before_ns"]) == (8_000, 1_000, 1_000)
    assert (a["event_lead_ns"], a["event_tail_ns"]) == (1_000, 0)  # start event queued behind the flush
    assert (b["queue_wait_ns"], b["launch_overhead_ns"], b["stream_idle_before_ns"]) == (0, 700, 16_000)
    assert (b["event_lead_ns"], b["event_tail_ns"]) == (800, 5_100)  # recorded at 40,200 and 50,100
    # events as the GPU would time them: start at max(record end, stream free), stop at max(record end, last op end)
    events = [
        {"backend": "flashmla", "shape": "q8_ctx8k", "iter": 0, "event_us": (30_000 - 9_000) / 1e3},
        {"backend": "flashmla", "shape": "q8_ctx8k", "iter": 1, "event_us": (50_100 - 40_200) / 1e3},
    ]
    table = calls(att)
    summary = with_events(summarize(table, None), table, events).row(0, named=True)
    assert summary["event_unexplained_us"] == pytest.approx(0, abs=1e-9)
    assert summary["overlap_us"] == pytest.approx(1.0)  # median of 2,000 and 0 ns


def test_a_call_without_event_records_has_no_event_columns(exports: dict[str, Path]) -> None:
    table = calls(attribute(load_trace(exports["h200_torch_tiny"])))
    assert table.height and table["event_lead_ns"].is_null().all() and table["event_tail_ns"].is_null().all()


@pytest.mark.slow
def test_unreadable_runner_json_is_one_line(tmp_path: Path) -> None:
    _synthetic(tmp_path / "trace.sqlite")
    (tmp_path / "runner.json").write_text('{"events": [{"backend": "x"}]}', encoding="utf-8")
    with pytest.raises(traceattr.core.errors.TraceError, match=r"runner\.json"):
        runner_events(tmp_path)
    assert runner_events(tmp_path / "nothing") is None
    out = subprocess.run([sys.executable, "-m", "traceattr", "compare", str(tmp_path)], capture_output=True, text=True,
                         check=False)  # fmt: skip
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "runner.json" in out.stderr


# -- random ops against a brute-force oracle ----------------------------------------------------------------
OPS = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 120), st.integers(0, 40), st.sampled_from(ROLES)),
    min_size=1,
    max_size=12,
)


def _oracle(ops: list[tuple[int, int, int, str]]) -> dict[int, dict[str, int]]:
    """Per group: walk every nanosecond of the span and name what runs in it."""
    out: dict[int, dict[str, int]] = {}
    for g in {o[0] for o in ops}:
        mine = [(s, s + d, r) for gg, s, d, r in ops if gg == g]
        parts = dict.fromkeys([*(f"{r}_exposed_ns" for r in ROLES), "overlap_ns", "idle_ns"], 0)
        for t in range(min(s for s, _, _ in mine), max(e for _, e, _ in mine)):
            running = {r for s, e, r in mine if s <= t < e}
            key = "idle_ns" if not running else "overlap_ns" if len(running) > 1 else f"{running.pop()}_exposed_ns"
            parts[key] += 1
        out[g] = parts
    return out


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(ops=OPS)
def test_exposure_equals_brute_force_and_partitions_the_span(ops: list[tuple[int, int, int, str]]) -> None:
    frame = pl.DataFrame(
        {"call_id": [o[0] for o in ops], "start": [o[1] for o in ops], "end": [o[1] + o[2] for o in ops],
         "role": pl.Series([o[3] for o in ops], dtype=pl.Enum(list(ROLES)))},
        schema_overrides={"call_id": pl.Int64, "start": pl.Int64, "end": pl.Int64},
    )  # fmt: skip
    got = {r.pop("call_id"): r for r in exposure(frame).iter_rows(named=True)}
    assert got == _oracle(ops)
    span = frame.group_by("call_id").agg((pl.col("end").max() - pl.col("start").min()).alias("span"))
    for g, s in span.iter_rows():
        assert sum(got[g].values()) == s


def test_report_shows_exposed_bars_and_the_event_column(exports: dict[str, Path]) -> None:
    from traceattr.present.report.data import collect
    from traceattr.present.report.figures_compare import attribution_figure
    from traceattr.present.report.table import numbers_table

    d = collect(attribute(load_trace(exports[SWEEP])), events=runner_events(DATA / SWEEP))
    fa3 = d.table.filter((pl.col("backend") == "fa3") & pl.col("shape").str.contains("ctx8k_")).row(0, named=True)
    assert fa3["event_vs_span"] == pytest.approx(3.369, abs=1e-3)  # the "+337%" beside a 25 µs call …
    assert fa3["event_minus_span_us"] > 80 and abs(fa3["event_unexplained_us"]) < 0.1  # … explained per call
    page = numbers_table(d.table, {}, "")
    assert "events − span µs = lead + tail" in page and "queue wait µs" in page and "launch µs" not in page
    fig = attribution_figure(d.summary)
    bars = {t.name: t for t in fig.data if t.type == "bar" and t.meta == "us"}
    groups = list(zip(*bars["overlap"].x, strict=True))
    mla = groups.index(("q8_ctx8k_h16_b1_bf16_p64", "flashmla"))
    stack = sum(t.y[mla] for t in bars.values())
    tick = next(t for t in fig.data if t.type == "scatter" and t.meta == "us").y[mla]
    assert stack == pytest.approx(tick) and bars["overlap"].y[mla] > 5  # the median call's parts add up to its span
