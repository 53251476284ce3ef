"""traceattr sweep: the pure bisection decision, and the sweep through a fake executor with a known crossover."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from tests.helpers import CROSS, FakeSweep, cli, ctx_of, linear_time, sweep_plan
from traceattr.analysis.sweep_points import replay, time_falls, usable
from traceattr.analysis.sweep_steps import (
    KINDS,
    RETRIES,
    SIDES,
    Point,
    decide,
    default_steps,
    halvings,
    midpoint,
    narrow,
    side_of,
)
from traceattr.core.errors import TraceattrError, TraceError
from traceattr.core.records import SWEEP_FILE, SweepRecord
from traceattr.jobs.sweep import ctx_range, family_shape, run_sweep
from traceattr.present.formats import sweep_text

SWEEPS = Path(__file__).parents[1] / "examples" / "sweeps"


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
    d = decide(pts((8000, "below"), (1_000_000, "below")), 0.1, 1, 8)
    assert d.kind == "no crossover" and d.ends == ("below", "below")
    d = decide(pts((8000, "same"), (1_000_000, "above")), 0.1, 1, 8)
    assert d.kind == "no crossover" and d.ends == ("same", "above")
    d = decide(pts((8000, "below"), (1_000_000, "above")), 0.1, 8, 8)
    assert d.kind == "budget" and d.bracket == (8000, 1_000_000)
    refused = [*pts((8000, "below"), (1_000_000, "above")), Point(89_400, "refused", cause="clock 0.50 < 0.7")]
    d = decide(refused, 0.1, 2, 8)
    assert d.kind == "measure" and d.next_ctx == 89_400 and d.refused == (89_400, "clock 0.50 < 0.7")
    d = decide([*refused, Point(89_400, "refused", cause="parity")], 0.1, 3, 8)
    assert d.kind == "refused" and d.refused == (89_400, "parity") and d.bracket == (8000, 1_000_000)
    # a refused ctx measured again and passing is used
    assert decide([*refused, Point(89_400, "below")], 0.1, 3, 8).bracket == (89_400, 1_000_000)
    assert decide(pts((1000, "below"), (1001, "above")), 0.0001, 2, 8).kind == "resolution"
    with pytest.raises(ValueError, match="no measured point"):
        decide([], 0.1, 0, 8)


def test_a_refused_end_is_measured_again_never_no_crossover() -> None:
    """The H200 --graphs defect: 32k refused by the directional gate at step 1 was read as "no crossover"."""
    low = Point(32_000, "refused", 1.14, 1.13, 1.15, "directional 0.0292 > 0.02")
    step1 = [low, Point(900_000, "above", 0.90, 0.90, 0.90)]
    d = decide(step1, 0.1, 1, 8)
    assert d.kind == "measure" and d.next_ctx == 32_000 and d.refused == (32_000, "directional 0.0292 > 0.02")
    # refused again: the answer says so, naming the ctx and its gate
    d = decide([*step1, replace(low, cause="directional 0.031 > 0.02")], 0.1, 2, 8)
    assert d.kind == "refused" and d.refused == (32_000, "directional 0.031 > 0.02") and d.bracket is None
    # passing the second time: the sweep goes on from both ends
    d = decide([*step1, Point(32_000, "below", 1.13, 1.12, 1.14)], 0.1, 2, 8)
    assert d.kind == "measure" and d.bracket == (32_000, 900_000) and d.next_ctx == midpoint(32_000, 900_000)
    # the high end, and both ends: each measured again, the lower first; the budget names what waits
    d = decide([Point(32_000, "below"), Point(900_000, "refused", cause="clock")], 0.1, 1, 8)
    assert d.kind == "measure" and d.next_ctx == 900_000
    both = [Point(32_000, "refused", cause="a"), Point(900_000, "refused", cause="b")]
    assert decide(both, 0.1, 1, 8).next_ctx == 32_000
    assert decide([*both, Point(32_000, "below")], 0.1, 2, 8).next_ctx == 900_000
    d = decide(step1, 0.1, 1, 1)
    assert d.kind == "budget" and d.refused == (32_000, "directional 0.0292 > 0.02")
    # a ctx refused twice stops the sweep even when a later point passed
    d = decide([*step1, replace(low, cause="x"), Point(170_000, "above")], 0.1, 3, 8)
    assert d.kind == "refused" and d.refused == (32_000, "x")


def test_several_crossovers_are_said_not_bracketed() -> None:
    d = decide(pts((8000, "below"), (50_000, "above"), (200_000, "same"), (400_000, "below"), (1_000_000, "above")),
               0.1, 5, 20)  # fmt: skip
    assert d.kind == "several crossovers" and d.crossings == ((8000, 50_000), (50_000, 400_000), (400_000, 1_000_000))
    assert d.bracket is None and d.to_json()["crossings"] == [[8000, 50_000], [50_000, 400_000], [400_000, 1_000_000]]
    # one change, whatever lies between (ties), is a crossover
    d = decide(pts((8000, "below"), (50_000, "same"), (200_000, "below"), (1_000_000, "above")), 0.1, 4, 20)
    assert d.kind == "measure" and d.crossings == ((200_000, 1_000_000),) and d.bracket == (200_000, 1_000_000)


def test_one_change_the_other_way_is_bisected_with_the_names_swapped() -> None:
    d = decide(pts((8000, "above"), (1_000_000, "below")), 0.1, 1, 8)
    assert d.kind == "measure" and d.swapped and d.bracket == (8000, 1_000_000)
    d = decide(pts((8000, "above"), (200_000, "above"), (230_000, "below"), (1_000_000, "below")), 0.1, 4, 8)
    assert d.kind == "crossover" and d.swapped and d.bracket == (200_000, 230_000)


def test_default_budget_follows_the_width_and_range() -> None:
    # 32k–900k to ±10%: log(900/32) / log(1.1/0.9) = 16.6 → 5 halvings; + step 1 + room for 2 retries
    assert halvings(32_000, 900_000, 0.1) == 5 and default_steps(32_000, 900_000, 0.1) == 1 + 5 + 2 * RETRIES
    assert halvings(32_000, 900_000, 0.05) == 6 and halvings(200_000, 230_000, 0.1) == 0
    # the halvings reach the width, midpoints rounded as the sweep rounds them
    for lo, hi, width in ((32_000, 900_000, 0.1), (8000, 1_000_000, 0.1), (1000, 2_000_000, 0.03), (4096, 65536, 0.2)):
        for sides in ("below", "above"):  # the crossing at either end of every bracket
            points = pts((lo, "below"), (hi, "above"))
            d = decide(points, width, 1, 100)
            while d.kind == "measure":
                points.append(Point(d.next_ctx, sides))
                d = decide(points, width, len(points) - 1, 100)
            assert d.kind == "crossover" and len(points) - 1 <= 1 + halvings(lo, hi, width), (lo, hi, width, points)


def test_the_h200_records_read_again() -> None:
    """The shipped H200 searches, decided again on their points: what this traceattr says of them."""
    graphs = SweepRecord.read(SWEEPS / "h200_q8_fa3_flashmla_graphs.json")
    assert graphs.result is not None and graphs.result["kind"] == "no crossover"  # as recorded (the defect)
    now = replay(graphs)
    assert now is not None and now.kind == "measure" and now.next_ctx == 32_000
    assert now.refused == (32_000, "directional 0.0292 > 0.02")
    eager = SweepRecord.read(SWEEPS / "h200_q8_fa3_flashmla_eager.json")
    now = replay(eager)
    assert now is not None and now.kind == "budget" and now.bracket == (138_000, 170_000)
    assert now.half_width == pytest.approx(0.104, abs=5e-4) and now.refused == (153_000, "directional 0.0234 > 0.02")
    text = sweep_text(eager.header, now.to_json())
    assert "138k–170k (154k ±10.4%, asked ±10%)" in text and "153k was refused (directional 0.0234 > 0.02)" in text
    # flashmla's median falls from 138k to 170k: the time is not monotone in ctx
    assert [(a, c, n) for a, c, _, n, _ in time_falls(eager)] == [("flashmla", 138_000, 170_000)]
    # one change of side among the points that passed: one bracket, not several
    passed = [Point(c, side) for c, side in usable(eager).select("ctx", "side").iter_rows()]
    assert decide(passed, 0.1, 6, 8).crossings == ((138_000, 170_000),)


def test_estimate_interpolates_the_ratio() -> None:
    d = decide([Point(100_000, "below", 1.1), Point(110_000, "above", 1 / 1.1)], 0.1, 3, 8)
    assert d.estimate == round(math.sqrt(100_000 * 110_000))


# -- the sweep through a fake executor -------------------------------------------------------------
@pytest.mark.slow
def test_search_brackets_a_known_crossover_within_the_width(tmp_path: Path) -> None:
    fake = FakeSweep(linear_time)
    record = run_sweep(sweep_plan(tmp_path), fake)
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
    again = SweepRecord.read(tmp_path / "sweep" / SWEEP_FILE)
    assert again.result == result and len(again.steps) == len(record.steps)
    assert all(p["gates"]["clock_gate"] == "pass" for s in again.steps for p in s["points"])
    assert again.passing_folders == tuple(s["folder"] for s in record.steps)


@pytest.mark.slow
def test_search_with_a_tie_band(tmp_path: Path) -> None:
    def t(shape: str, arm: str) -> float:
        k = ctx_of(shape) / 1000
        base = 25 + 0.45 * k
        if arm == "fa3":
            return base
        if k < 60:
            return base * 1.2
        return base * (1.0 if k < 300 else 0.8)  # identical over 60k–300k

    record = run_sweep(sweep_plan(tmp_path, max_steps=16), FakeSweep(t))
    result = record.result
    assert result is not None and result["kind"] == "tie band", result
    lo, hi = result["bracket"]
    band = result["band"]
    assert lo < 60_000 <= band[0] and band[1] < 300_000 <= hi


def test_search_one_backend_always_best(tmp_path: Path) -> None:
    record = run_sweep(sweep_plan(tmp_path, arms=("fa3", "fa2")), FakeSweep(linear_time))
    assert record.result is not None and record.result["kind"] == "no crossover"
    assert len(record.steps) == 1


@pytest.mark.slow
def test_refused_step_is_measured_again(tmp_path: Path) -> None:
    fake = FakeSweep(linear_time, low_clock_steps=(2,))
    record = run_sweep(sweep_plan(tmp_path), fake)
    assert record.steps[1]["points"][0]["status"] == "refused"
    assert "clock" in record.steps[1]["points"][0]["refused_by"]
    assert fake.requests[2].shapes == fake.requests[1].shapes  # the same ctx again
    assert record.result is not None and record.result["kind"] in ("crossover", "tie band")


@pytest.mark.slow
def test_refused_end_at_step_1_is_measured_again(tmp_path: Path) -> None:
    """An end refused at step 1 (the H200 --graphs search) is measured again, not read as "no crossover"."""
    fake = FakeSweep(linear_time, low_clock=((1, 8000),))
    record = run_sweep(sweep_plan(tmp_path), fake)
    low, high = record.steps[0]["points"]
    assert low["status"] == "refused" and "clock" in low["refused_by"] and high["side"] == "above"
    assert record.steps[0]["decision"]["kind"] == "measure" and record.steps[0]["decision"]["next_ctx"] == 8000
    assert record.steps[0]["decision"]["refused"]["ctx"] == 8000
    assert fake.requests[1].shapes == ("q8_ctx8k_h16_b1_bf16_p64",)
    assert record.result is not None and record.result["kind"] in ("crossover", "tie band")
    assert record.result["bracket"][0] <= CROSS <= record.result["bracket"][1]


def test_an_end_refused_twice_is_the_answer(tmp_path: Path) -> None:
    fake = FakeSweep(linear_time, low_clock=((1, 1_000_000), (2, 1_000_000)))
    record = run_sweep(sweep_plan(tmp_path), fake)
    result = record.result
    assert result is not None and result["kind"] == "refused" and len(record.steps) == 2
    assert result["refused"]["ctx"] == 1_000_000 and "clock" in result["refused"]["cause"]
    text = sweep_text(record.header, result)
    assert "1M was refused twice by its gates (clock" in text and "no bracket yet" in text
    assert SweepRecord.read(tmp_path / "sweep" / SWEEP_FILE).result == result


@pytest.mark.slow
def test_default_budget_and_how_far_a_spent_budget_got(tmp_path: Path) -> None:
    record = run_sweep(sweep_plan(tmp_path / "a", max_steps=None), FakeSweep(linear_time))
    h = record.header
    assert h["max_steps"] == default_steps(8000, 1_000_000, 0.1) == 8 and h["max_steps_from"] == "default"
    assert record.result is not None and record.result["kind"] in ("crossover", "tie band")
    record = run_sweep(sweep_plan(tmp_path / "b", max_steps=3), FakeSweep(linear_time))
    result = record.result
    assert result is not None and result["kind"] == "budget" and record.header["max_steps_from"] == "--max-steps"
    lo, hi = result["bracket"]
    assert result["half_width"] == pytest.approx((hi - lo) / (hi + lo)) and result["half_width"] > 0.1
    assert "asked ±10%" in sweep_text(record.header, result)


@pytest.mark.slow
def test_search_budget(tmp_path: Path) -> None:
    record = run_sweep(sweep_plan(tmp_path, max_steps=3), FakeSweep(linear_time))
    assert record.result is not None and record.result["kind"] == "budget" and len(record.steps) == 3


def test_plan_and_options_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(TraceattrError, match="ctx\\*"):
        sweep_plan(tmp_path, family="q8_ctx8k")
    with pytest.raises(TraceattrError, match="two or more arms"):
        sweep_plan(tmp_path, arms=("fa3",))
    with pytest.raises(TraceattrError, match="width"):
        sweep_plan(tmp_path, width=1.5)
    assert ctx_range("8k:1m") == (8000, 1_000_000)
    for bad in ("8k", "1m:8k", "x:1m"):
        with pytest.raises(TraceattrError, match="--ctx-range"):
            ctx_range(bad)
    assert family_shape("q4_ctx*_h128_fp8", 65536).name == "q4_ctx65536_h128_b1_fp8_p64"


def test_search_record_is_checked_as_input(tmp_path: Path) -> None:
    record = run_sweep(sweep_plan(tmp_path, arms=("fa3", "fa2")), FakeSweep(linear_time))
    content = record.to_json()
    assert SweepRecord.from_json(json.loads(json.dumps(content))).header["family"] == "q8_ctx*"
    for key, value in (("width", 2), ("steps", [{"step": 0}]), ("command", "round"), ("schema", "traceattr.search/9")):
        with pytest.raises(TraceError):
            SweepRecord.from_json({**content, key: value}, tmp_path / "search.json")


@pytest.mark.slow
def test_sweep_command_writes_its_record_and_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command end to end, its captures from the fake: steps, answer, sweep.json and report.html."""
    import traceattr.cli.sweep as command

    monkeypatch.setattr(command, "require_runnable", lambda plan: None)
    monkeypatch.setattr(
        command, "run_sweep", lambda plan, on_step: run_sweep(plan, FakeSweep(linear_time), on_step=on_step)
    )
    rc, out, err = cli(capsys, "sweep", "-s", "q8_ctx*", "-b", "fa3", "-b", "flashmla", "--ctx-range", "8k:1m",
                       "--out-root", tmp_path)  # fmt: skip
    assert rc == 0, err
    (folder,) = tmp_path.iterdir()
    record = SweepRecord.read(folder / SWEEP_FILE)
    assert record.header["max_steps"] == 8 and record.result is not None
    assert sweep_text(record.header, record.result) in " ".join(out.split())
    assert (folder / "report.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert f"sweep folder: {folder} (report: report.html)" in out
