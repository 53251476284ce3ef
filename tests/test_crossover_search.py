"""traceattr sweep: the pure bisection decision, and the search through a fake executor with a known crossover."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.synth.builder import TraceBuilder
from traceattr.analysis.bisect import KINDS, SIDES, Decision, Point, decide, midpoint, narrow, side_of
from traceattr.analysis.calls import calls as call_table
from traceattr.analysis.rounds import Capture
from traceattr.attribution.engine import attribute
from traceattr.core.callnames import DOMAIN, CallName
from traceattr.core.errors import TraceattrError, TraceError
from traceattr.core.records import SEARCH, RunnerRecord, SearchRecord
from traceattr.core.shapes import parse_shape
from traceattr.jobs.crossover_search import SearchPlan, ctx_range, family_shape, run_search
from traceattr.runner.plan import arm_letters, round_order
from traceattr.trace.loader import load_trace


# -- the pure decision ---------------------------------------------------------------------------
def pts(*spec: tuple[int, str]) -> list[Point]:
    return [Point(c, s) for c, s in spec]


def test_vocabulary_is_the_records() -> None:
    assert set(SIDES) == {"below", "above", "same", "ambiguous", "refused"}
    assert "measure" in KINDS and "tie band" in KINDS


def test_side_of_verdicts() -> None:
    assert side_of("slower") == "below" and side_of("faster") == "above"
    assert side_of("same") == "same" and side_of("ambiguous") == "ambiguous"
    assert side_of("faster", passed=False) == "refused"


def test_bisects_in_log_ctx_until_narrow() -> None:
    d = decide(pts((8000, "below"), (1_000_000, "above")), 0.1, 1, 8)
    assert d.kind == "measure" and d.next_ctx == midpoint(8000, 1_000_000) == 89_400
    assert d.bracket == (8000, 1_000_000)
    d = decide(pts((200_000, "below"), (230_000, "above")), 0.1, 5, 8)
    assert d.kind == "crossover" and d.bracket == (200_000, 230_000) and d.half_width <= 0.1
    assert narrow(200_000, 244_000, 0.1) and not narrow(200_000, 245_000, 0.1)


def test_tie_band_refines_both_edges_then_says_so() -> None:
    d = decide(pts((8000, "below"), (1_000_000, "above"), (89_400, "same")), 0.1, 2, 20)
    assert d.kind == "measure" and d.band == (89_400, 89_400)
    # both edges narrow, the inside all "same": a tie band
    d = decide(pts((50_000, "below"), (55_000, "same"), (300_000, "same"), (320_000, "above")), 0.1, 9, 20)
    assert d.kind == "tie band" and d.band == (55_000, 300_000) and d.bracket == (50_000, 320_000)
    d = decide(pts((50_000, "below"), (55_000, "ambiguous"), (300_000, "same"), (320_000, "above")), 0.1, 9, 20)
    assert d.kind == "undecided band"


def test_no_crossover_budget_refused_and_resolution() -> None:
    assert decide(pts((8000, "below"), (1_000_000, "below")), 0.1, 1, 8).kind == "no crossover"
    assert decide(pts((8000, "same"), (1_000_000, "above")), 0.1, 1, 8).kind == "no crossover"
    d = decide(pts((8000, "below"), (1_000_000, "above")), 0.1, 8, 8)
    assert d.kind == "budget" and d.bracket == (8000, 1_000_000)
    refused = pts((8000, "below"), (1_000_000, "above"), (89_400, "refused"))
    assert decide(refused, 0.1, 2, 8) == Decision("measure", next_ctx=89_400)
    assert decide([*refused, Point(89_400, "refused")], 0.1, 3, 8).kind == "refused"
    # a refused ctx measured again and passing is used
    assert decide([*refused, Point(89_400, "below")], 0.1, 3, 8).bracket == (89_400, 1_000_000)
    assert decide(pts((1000, "below"), (1001, "above")), 0.0001, 2, 8).kind == "resolution"


def test_estimate_interpolates_the_ratio() -> None:
    d = decide([Point(100_000, "below", 1.1), Point(110_000, "above", 1 / 1.1)], 0.1, 3, 8)
    assert d.estimate == round(math.sqrt(100_000 * 110_000))


# -- the search through a fake executor -------------------------------------------------------------
CROSS = 183_333  # fa3 25 + 0.45 µs per 1k ctx, flashmla 36 + 0.39: equal at 11 / 0.06 k


def linear_time(shape: str, arm: str) -> float:
    """µs of one call: the two lines above (fa2 slower everywhere)."""
    k = _ctx(shape) / 1000
    return {"fa3": 25 + 0.45 * k, "flashmla": 36 + 0.39 * k, "fa2": 30 + 1.0 * k}[arm]


def _ctx(shape: str) -> int:
    return parse_shape(shape).ctx


def synth(folder: Path, request: Any, t: Any, iters: int, seed: int, fraction: float = 0.95) -> Capture:
    """A capture of the requested shapes and arms, ABBA, each call t(shape, arm) µs with 0.2% noise."""
    rng = np.random.default_rng(seed)
    b = TraceBuilder()
    dom = b.domain(DOMAIN, tid=1)
    letters = arm_letters(request.arms)
    now = 10_000
    for shape in request.shapes:
        for i in range(iters):
            for arm in round_order(request.arms, i):
                dur = int(1000 * t(shape, arm) * (1 + 0.002 * rng.standard_normal()))
                b.push_range(tid=1, start=now, end=now + 5_000, message=CallName(arm, shape, letters[arm], i).message,
                             domain=dom)  # fmt: skip
                b.launch(tid=1, start=now + 100, end=now + 200, kernel="mla_decode_kernel", gpu_start=now + 1_000,
                         gpu_end=now + 1_000 + dur)  # fmt: skip
                now += dur + 20_000
    trace = b.write(folder / "trace.sqlite", gpu_name="NVIDIA H200", cc=(9, 0))
    att = attribute(load_trace(trace))
    clocks = {"sm_clock_mhz_median": round(1980 * fraction), "sm_clock_max_mhz": 1980, "fraction": fraction}
    runner = {
        "gpu": {"name": "NVIDIA H200"}, "timed": True,
        "shapes": {s: {"backends": {a: {"status": "ok", "relative_error": 0.004} for a in request.arms},
                       "clocks": clocks} for s in request.shapes},
        "arms": {a: {"backend": a, "options": {}, "program": a} for a in request.arms},
        "protocol": {"between": "flush", "order": "abba", "flush_bytes": 256 << 20},
    }  # fmt: skip
    return Capture(request.round, call_table(att), RunnerRecord.from_json(runner), str(folder), "abba", attribution=att)


class Fake:
    """Stands in for profile_executor: synthesises each step's capture with timing *t*; records the requests."""

    def __init__(self, t: Any, iters: int = 12, low_clock_steps: tuple[int, ...] = ()) -> None:
        self.t, self.iters, self.requests, self.low = t, iters, [], low_clock_steps

    def __call__(self, request, plan, on_line):  # type: ignore[no-untyped-def]
        self.requests.append(request)
        request.folder.mkdir(parents=True)
        fraction = 0.5 if len(self.requests) in self.low else 0.95
        return synth(request.folder, request, self.t, self.iters, len(self.requests), fraction)


def plan(tmp: Path, **kw: Any) -> SearchPlan:
    base = {"family": "q8_ctx*", "arms": ("fa3", "flashmla"), "ctx_low": 8000, "ctx_high": 1_000_000,
            "folder": tmp / "sweep", "width": 0.1, "max_steps": 10}  # fmt: skip
    return SearchPlan(**{**base, **kw})


def test_search_brackets_a_known_crossover_within_the_width(tmp_path: Path) -> None:
    fake = Fake(linear_time)
    record = run_search(plan(tmp_path), fake)
    result = record.result
    assert result is not None and result["kind"] in ("crossover", "tie band")
    lo, hi = result["bracket"]
    assert lo <= CROSS <= hi  # a tie band's bracket holds the crossing too (the "same" zone around it)
    if result["kind"] == "crossover":
        assert hi - lo <= 0.1 * (hi + lo)
    else:  # the band's edges are within the width
        assert result["band"][0] - lo <= 0.1 * (result["band"][0] + lo)
        assert hi - result["band"][1] <= 0.1 * (hi + result["band"][1])
    assert len(record.steps) <= 8  # the ends, then a handful of bisection steps
    assert fake.requests[0].shapes == ("q8_ctx8k_h16_b1_bf16_p64", "q8_ctx1m_h16_b1_bf16_p64")
    assert fake.requests[1].arms == ("flashmla", "fa3")  # the order alternates between steps
    assert record.header["below"] == "fa3" and record.header["above"] == "flashmla"
    # the record on disk reads back, with every step's gates
    again = SearchRecord.read(tmp_path / "sweep" / SEARCH)
    assert again.result == result and len(again.steps) == len(record.steps)
    assert all(p["gates"]["clock_gate"] == "pass" for s in again.steps for p in s["points"])
    assert again.passing_folders == tuple(s["folder"] for s in record.steps)


def test_search_with_a_tie_band(tmp_path: Path) -> None:
    def t(shape: str, arm: str) -> float:
        k = _ctx(shape) / 1000
        base = 25 + 0.45 * k
        if arm == "fa3":
            return base
        if k < 60:
            return base * 1.2
        return base * (1.0 if k < 300 else 0.8)  # identical over 60k–300k

    record = run_search(plan(tmp_path, max_steps=16), Fake(t))
    result = record.result
    assert result is not None and result["kind"] == "tie band", result
    lo, hi = result["bracket"]
    band = result["band"]
    assert lo < 60_000 <= band[0] and band[1] < 300_000 <= hi


def test_search_one_backend_always_best(tmp_path: Path) -> None:
    record = run_search(plan(tmp_path, arms=("fa3", "fa2")), Fake(linear_time))
    assert record.result is not None and record.result["kind"] == "no crossover"
    assert len(record.steps) == 1


def test_refused_step_is_measured_again(tmp_path: Path) -> None:
    fake = Fake(linear_time, low_clock_steps=(2,))
    record = run_search(plan(tmp_path), fake)
    assert record.steps[1]["points"][0]["status"] == "refused"
    assert "clock" in record.steps[1]["points"][0]["refused_by"]
    assert fake.requests[2].shapes == fake.requests[1].shapes  # the same ctx again
    assert record.result is not None and record.result["kind"] in ("crossover", "tie band")


def test_search_budget(tmp_path: Path) -> None:
    record = run_search(plan(tmp_path, max_steps=3), Fake(linear_time))
    assert record.result is not None and record.result["kind"] == "budget" and len(record.steps) == 3


def test_plan_and_options_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(TraceattrError, match="ctx\\*"):
        plan(tmp_path, family="q8_ctx8k")
    with pytest.raises(TraceattrError, match="two or more arms"):
        plan(tmp_path, arms=("fa3",))
    with pytest.raises(TraceattrError, match="width"):
        plan(tmp_path, width=1.5)
    assert ctx_range("8k:1m") == (8000, 1_000_000)
    for bad in ("8k", "1m:8k", "x:1m"):
        with pytest.raises(TraceattrError, match="--ctx-range"):
            ctx_range(bad)
    assert family_shape("q4_ctx*_h128_fp8", 65536).name == "q4_ctx65536_h128_b1_fp8_p64"


def test_search_record_is_checked_as_input(tmp_path: Path) -> None:
    record = run_search(plan(tmp_path, arms=("fa3", "fa2")), Fake(linear_time))
    content = record.to_json()
    assert SearchRecord.from_json(json.loads(json.dumps(content))).header["family"] == "q8_ctx*"
    for key, value in (("width", 2), ("steps", [{"step": 0}]), ("command", "round"), ("schema", "traceattr.search/9")):
        with pytest.raises(TraceError):
            SearchRecord.from_json({**content, key: value}, tmp_path / "search.json")
