"""traceattr round on CPU: receipts from constructed traces (tests.synth) and constructed runner.json files."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.helpers import BASE, CAND, ROWS, US, FakeExecutor, Timing, captures, round_plan, synth_capture, timing
from traceattr.analysis.rounds import Capture, Gates, Receipt, Row, round_rows
from traceattr.attribution.engine import attribute
from traceattr.cli import main
from traceattr.core import runfolder
from traceattr.core.errors import TraceattrError
from traceattr.core.precision import median_noise
from traceattr.core.progress import Progress
from traceattr.core.shapes import parse_shape
from traceattr.jobs.round import RoundPlan, read_receipt, read_rows, retry_plan, run_round
from traceattr.present.receipt import markdown
from traceattr.trace.loader import load_trace


def by_row(frame: pl.DataFrame) -> dict[str, dict[str, Any]]:
    return {r["row"]: r for r in frame.iter_rows(named=True)}


# -- verdicts and headline numbers -----------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(("ratio", "noise", "verdict"), [(0.90, 0.002, "faster"), (1.10, 0.002, "slower"),
                                                         (1.0, 0.002, "same"), (1.0, 0.15, "ambiguous")])  # fmt: skip
def test_verdict_classes(tmp_path: Path, ratio: float, noise: float, verdict: str) -> None:
    rows = round_rows(ROWS, captures(tmp_path, timing(ratio, noise=noise)), BASE, CAND, Gates(directional_limit=1.0))
    got = by_row(rows)
    for row in ROWS:
        r = got[row.label]
        assert r["verdict"] == verdict, r
        assert r["pairs"] == 3 * 8 and r["captures"] == 3 and len(r["baseline_captures_us"]) == 3
        assert r["ratio"] == pytest.approx(r["candidate_us"] / r["baseline_us"])
        if verdict != "ambiguous":  # the interval is about the headline ratio (median of round medians)
            assert r["low"] <= r["ratio"] <= r["high"]
        if noise < 0.01:
            assert r["ratio"] == pytest.approx(ratio, rel=0.01)
            assert r["baseline_us"] == pytest.approx(100 if row is ROWS[0] else 200, rel=0.01)
    receipt = Receipt({"baseline": BASE, "candidate": CAND}, rows)
    if verdict != "ambiguous":
        assert receipt.geomean == pytest.approx(ratio, rel=0.01)


# -- gates ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_first_arm_bias_trips_the_directional_gate(tmp_path: Path) -> None:
    # whichever arm runs first in a pair is 5% faster: the ratio depends on the order, not on the arms
    rows = by_row(round_rows(ROWS, captures(tmp_path, timing(1.0, first_bias=0.05)), BASE, CAND))
    for r in rows.values():
        # baseline first: c / (0.95 b) = 1.0526; candidate first: 0.95 c / b = 0.95 → 0.1026
        assert r["directional"] == pytest.approx(1 / 0.95 - 0.95, abs=0.01)
        assert r["directional_gate"] == "fail" and r["status"] == "refused"
        assert "directional 0.10" in r["refused_by"]
    unbiased = by_row(round_rows(ROWS, captures(tmp_path, timing(1.0)), BASE, CAND))
    assert all(r["directional"] < 0.02 and r["status"] == "pass" for r in unbiased.values())


@pytest.mark.slow
def test_low_loaded_clock_refuses_and_missing_clock_is_not_measured(tmp_path: Path) -> None:
    t = timing(0.9)
    low = by_row(round_rows(ROWS, captures(tmp_path, t, fraction=1297 / 1965), BASE, CAND))
    assert all(
        r["clock_gate"] == "fail" and r["clock_fraction"] == pytest.approx(0.66, abs=0.005) for r in low.values()
    )
    assert all("clock 0.66 < 0.7" in r["refused_by"] for r in low.values())
    missing = by_row(round_rows(ROWS, captures(tmp_path, t, fraction=None), BASE, CAND))
    assert all(r["clock_gate"] == "not measured" and r["status"] == "refused" for r in missing.values())
    off = by_row(round_rows(ROWS, captures(tmp_path, t, fraction=None), BASE, CAND, Gates(min_clock=0)))
    assert all(r["clock_gate"] == "off" and r["status"] == "pass" for r in off.values())


@pytest.mark.slow
def test_one_slow_round_clock_is_the_rows_clock(tmp_path: Path) -> None:
    t = timing(0.9)
    caps = [synth_capture(tmp_path, 0, (BASE, CAND), t), synth_capture(tmp_path, 1, (CAND, BASE), t, fraction=0.5)]
    r = by_row(round_rows(ROWS, caps, BASE, CAND))[ROWS[0].label]
    assert r["clock_fraction"] == 0.5 and r["clock_gate"] == "fail"


@pytest.mark.slow
def test_output_parity(tmp_path: Path) -> None:
    t = timing(1.0)
    same = by_row(round_rows(ROWS, captures(tmp_path, t, count=2), BASE, CAND))
    assert all(r["parity"] == "bitwise" and r["parity_gate"] == "pass" for r in same.values())
    differ = by_row(round_rows(ROWS, captures(tmp_path, t, count=2, sha=("ab" * 32, "cd" * 32)), BASE, CAND))
    assert all(
        r["parity_gate"] == "fail" and "parity (bitwise): outputs differ" in r["refused_by"] for r in differ.values()
    )
    nosha = by_row(round_rows(ROWS, captures(tmp_path, t, count=2, sha=("ab" * 32, None)), BASE, CAND))
    assert all(r["parity_gate"] == "not measured" for r in nosha.values())
    # different programs: bitwise is not expected; both arms passed the reference check
    other = by_row(round_rows(ROWS, captures(tmp_path, t, count=2, program=("fa3", "fa3+merge"),
                                             sha=("ab" * 32, "cd" * 32)), BASE, CAND))  # fmt: skip
    assert all(r["parity"] == "reference" and r["parity_gate"] == "pass" for r in other.values())
    off = by_row(round_rows(ROWS, captures(tmp_path, t, count=2, sha=("ab" * 32, "cd" * 32)), BASE, CAND,
                            Gates(parity=False)))  # fmt: skip
    assert all(r["parity_gate"] == "off" and r["status"] == "pass" for r in off.values())


def test_an_arm_that_did_not_run_refuses_the_row(tmp_path: Path) -> None:
    t = timing(0.9)
    caps = [synth_capture(tmp_path, 0, (BASE, CAND), t), synth_capture(tmp_path, 1, (CAND, BASE), t, skip={CAND})]
    r = by_row(round_rows(ROWS, caps, BASE, CAND))[ROWS[0].label]
    assert r["arms_gate"] == "fail" and r["status"] == "refused"
    assert f"{CAND} in capture 2: split-KV needs ctx ≥ 16k" in r["refused_by"]
    assert r["captures"] == 2 and len(r["candidate_captures_us"]) == 1


@pytest.mark.slow
def test_sensitivity_flags_a_verdict_smaller_than_the_protocol_effect(tmp_path: Path) -> None:
    t = timing(0.97)
    # back to back, the candidate is 8% slower than interleaved: the protocol moves the ratio more than the lever
    slow = timing(0.97 * 1.08)
    sens = [synth_capture(tmp_path, -1, (BASE, CAND), slow, order="blocked")]
    rows = by_row(round_rows(ROWS, captures(tmp_path, t), BASE, CAND, sensitivity=sens))
    for r in rows.values():
        assert r["verdict"] == "faster" and r["flagged"]
        assert r["sensitivity"] == pytest.approx(0.97 * 0.08, abs=0.01)
        assert r["candidate_shift"] == pytest.approx(0.08, abs=0.01) and abs(r["baseline_shift"]) < 0.01
    receipt = Receipt({"baseline": BASE, "candidate": CAND}, pl.DataFrame(list(rows.values())))
    assert "⚑" in markdown(receipt) and "protocol sensitivity 0.07" in markdown(receipt)


@pytest.mark.slow
def test_receipt_discloses_the_sampling(tmp_path: Path) -> None:
    """Iterations per capture come from the calls; the spans' median noise is shown where it missed the target."""
    steady, noisy = timing(1.0, noise=0.002), timing(1.0, noise=0.03, seed=1)
    caps = [
        synth_capture(tmp_path, 0, (BASE, CAND), steady, iters=8),
        synth_capture(tmp_path, 1, (CAND, BASE), noisy, iters=12),
        synth_capture(tmp_path, 2, (BASE, CAND), steady, iters=8),
    ]
    rows = by_row(round_rows(ROWS, caps, BASE, CAND))
    r = rows[ROWS[0].label]
    assert r["iters_captures"] == [8, 12, 8] and r["pairs"] == 28
    mine = (pl.col("backend") == BASE) & (pl.col("shape") == ROWS[0].shape)
    noisy_spans = caps[1].calls.filter(mine)["gpu_span_ns"].to_numpy()  # the noisy round's baseline, first row
    assert r["noise"] >= median_noise(noisy_spans) > 0.005  # the worst arm and round, here the noisy one
    header = round_plan(rows=ROWS, baseline=BASE, candidate=CAND, folder=tmp_path / "r", max_noise=0.005,
                       max_iters=500).header()  # fmt: skip
    receipt = Receipt(header, round_rows(ROWS, caps, BASE, CAND))
    md = markdown(receipt)
    assert "3 captures × 20–500 iterations (until each arm's median is within ±0.5%, 95%)" in md
    assert "GPU held before each ABBA group until the host has enqueued it (host-released hold)" in md
    assert len(re.findall(r"median noise ±\d\.\d\d% at 12 iterations", md)) == 2
    quiet = Receipt(header, round_rows(ROWS, [caps[0], caps[2]], BASE, CAND))
    assert "median noise" not in markdown(quiet) and quiet.rows["noise"].max() < 0.005
    assert receipt.csv_frame()["iters_captures"].to_list()[0] == "8;12;8"
    assert Receipt.from_json(json.loads(json.dumps(receipt.to_json()))).rows.equals(receipt.rows)


@pytest.mark.slow
def test_run_round_alternates_arms_and_writes_receipts(tmp_path: Path) -> None:
    fake = FakeExecutor(tmp_path, timing(0.9, first_bias=0.05))
    plan = round_plan(rows=ROWS, baseline=BASE, candidate=CAND, folder=tmp_path / "round", sensitivity=True,
                     rows_source="smoke")  # fmt: skip
    seen: list[str] = []
    receipt = run_round(plan, fake, on_progress=seen.append)
    # the first-arm bias (directional 0.10 in each capture, 5× the limit) makes both refusals certain after
    # two rounds: the third round and the back-to-back capture are not run
    assert [(r.index, r.arms[0], r.order) for r in fake.requests] == [(0, BASE, "abba"), (1, CAND, "abba")]
    assert len(seen) == len(ROWS) * 2 and seen[0].startswith("capture 1: ")
    assert receipt.summary()["passing"] == 0
    assert receipt.rows["captures"].to_list() == [2, 2] and receipt.rows["pairs"].to_list() == [16, 16]
    assert all(s.startswith("refusal certain after 2 captures: directional 0.09") for s in receipt.rows["stopped"])
    # a lead call opens every group (the default), so the first-arm bias reads as the position in the group
    assert all("position in the group: fa3 " in c and "(stopped early: refusal certain" in c
               for c in receipt.rows["cause"])  # fmt: skip
    assert "as the second call of its group vs" in receipt.rows["cause"][0]
    md = (plan.folder / "receipt.md").read_text(encoding="utf-8")
    assert "each group opens with an untimed call of its last arm (lead)" in md
    assert md.count("**refused**: directional") == 2 and "**0 / 2 rows pass**" in md
    assert "| row | baseline µs | candidate µs | ratio | verdict | gates |" in md
    csv = pl.read_csv(plan.folder / "receipt.csv")
    assert csv["row"].to_list() == [r.label for r in ROWS] and csv["status"].to_list() == ["refused"] * 2
    assert len(csv["baseline_captures_us"][0].split(";")) == 2  # the third round was not needed
    back = read_receipt(plan.folder / "receipt.json")
    assert back.rows.equals(receipt.rows) and back.header["protocol"]["between"] == "flush"
    assert back.header["gates"]["directional_limit"] == 0.02 and back.header["runner"]["protocol"]["order"] == "abba"


@pytest.mark.slow
def test_retry_remeasures_only_refused_rows_and_keeps_both(tmp_path: Path) -> None:
    first = Receipt(
        round_plan(rows=ROWS, baseline=BASE, candidate=CAND, folder=tmp_path / "r0", max_noise=0.004,
                  max_iters=300).header(),
        round_rows(ROWS, [*captures(tmp_path, timing(0.9), count=2)[:1],
                          synth_capture(tmp_path, 1, (CAND, BASE), timing(0.9), fraction=0.5)], BASE, CAND),
    )  # fmt: skip
    first = Receipt(
        first.header,
        first.rows.with_columns(  # only the second row refused
            pl.when(pl.col("row") == ROWS[0].label).then(pl.lit("pass")).otherwise(pl.col("status")).alias("status")
        ),
    )
    assert first.summary()["passing"] == 1
    (tmp_path / "r0").mkdir()
    (tmp_path / "r0" / "receipt.json").write_text(json.dumps(first.to_json(), default=str))
    before = (tmp_path / "r0" / "receipt.json").read_bytes()
    previous = read_receipt(tmp_path / "r0")
    plan = retry_plan(previous, tmp_path / "out", captures=2)
    assert [r.label for r in plan.rows] == [ROWS[1].label] and plan.first_capture == 3
    assert (plan.protocol.max_noise, plan.protocol.max_iters) == (0.004, 300)  # the retry samples as the round did
    fake = FakeExecutor(tmp_path, timing(0.9))
    merged = run_round(plan, fake, previous=previous)
    assert [r.index for r in fake.requests] == [3, 4] and fake.requests[0].arms[0] == CAND  # alternation continues
    assert merged.rows.height == 3
    attempts = merged.rows.filter(pl.col("row") == ROWS[1].label)
    assert attempts["attempt"].to_list() == [1, 2] and attempts["status"].to_list() == ["refused", "pass"]
    assert merged.summary()["passing"] == 2 and merged.header["retry_captures"] == [2]
    md = markdown(merged)
    assert f"{ROWS[1].label} (attempt 1)" in md and f"{ROWS[1].label} (attempt 2)" in md and "**2 / 2 rows pass**" in md
    assert (tmp_path / "r0" / "receipt.json").read_bytes() == before  # inputs are never modified
    assert read_receipt(plan.folder).rows.height == 3
    with pytest.raises(TraceattrError, match="nothing to retry"):
        retry_plan(merged, tmp_path / "out")


def test_an_interrupted_round_has_no_receipt_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeExecutor(tmp_path, timing(0.9))

    def interrupted(request, plan, on_line):  # type: ignore[no-untyped-def]
        if request.index == 1:
            raise KeyboardInterrupt  # Ctrl-C during the second capture
        return fake(request, plan, on_line)

    plan = RoundPlan(rows=ROWS, baseline=BASE, candidate=CAND, folder=tmp_path / "round")
    with pytest.raises(KeyboardInterrupt):
        run_round(plan, interrupted, report=True)
    assert sorted(p.name for p in plan.folder.iterdir()) == ["capture-1"]  # the capture is kept, no receipt
    with pytest.raises(TraceattrError, match="did not finish"):
        read_receipt(plan.folder)
    with pytest.raises(SystemExit) as exit_info:
        main(["round", "--retry", str(plan.folder)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "did not finish" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_report_of_a_round_folder_also_after_it_moved(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    plan = RoundPlan(rows=ROWS, baseline=BASE, candidate=CAND, folder=tmp_path / "device" / "round")
    run_round(plan, FakeExecutor(tmp_path, timing(0.9), name="trace.sqlite"), report=True)
    names = {p.name: p.stat().st_mtime_ns for p in plan.folder.iterdir()}
    assert names["receipt.json"] >= max(names["report.html"], names["receipt.md"], names["receipt.csv"])  # JSON last
    moved = tmp_path / "here" / "round"  # copied off the GPU machine: the receipt's capture paths are stale
    shutil.copytree(plan.folder, moved)
    shutil.rmtree(tmp_path / "device")
    (moved / "report.html").unlink()
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(moved)])
    assert exit_info.value.code in (0, None) and f"wrote {moved / 'report.html'}" in capsys.readouterr().out
    page = (moved / "report.html").read_text(encoding="utf-8")
    assert 'id="round"' in page and "2 / 2 rows pass" in page
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(moved), "--match", "fa3"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "round folder" in err and len(err.strip().splitlines()) == 1
    for folder in ("capture-1", "capture-2", "capture-3"):
        shutil.rmtree(moved / folder)
    # every capture gone: the receipt and its evidence still make the page, with a note why no figures
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(moved)])
    assert exit_info.value.code in (0, None) and "no capture has its trace.sqlite" in capsys.readouterr().err
    assert "2 / 2 rows pass" in (moved / "report.html").read_text(encoding="utf-8")


def test_markdown_escapes_and_geomean_over_passing_rows_only(tmp_path: Path) -> None:
    rows = round_rows(ROWS, captures(tmp_path, timing(0.8)), BASE, CAND).with_columns(
        pl.when(pl.col("row") == ROWS[1].label).then(pl.lit("refused")).otherwise(pl.col("status")).alias("status"),
        pl.when(pl.col("row") == ROWS[1].label).then(pl.lit("clock 0.50 < 0.7")).otherwise(pl.lit("")).alias("refused_by"),
        pl.when(pl.col("row") == ROWS[1].label).then(pl.lit(0.5)).otherwise(pl.col("ratio")).alias("ratio"),
    )  # fmt: skip
    receipt = Receipt({"baseline": "x|y", "candidate": CAND, "protocol": {"captures": 3}}, rows)
    assert receipt.geomean == pytest.approx(0.8, rel=0.01)  # the refused row's 0.5 is left out
    md = markdown(receipt)
    assert "x\\|y" in md and "**1 / 2 rows pass**" in md and "**refused**: clock 0.50 < 0.7" in md


# -- rows and the command line ----------------------------------------------------------------
def test_rows_file_and_named_sets(tmp_path: Path) -> None:
    f = tmp_path / "rows.txt"
    f.write_text("# published rows\nmtp_h96_b8_q4_kv342305\n\nq8_ctx900k  # long\n", encoding="utf-8")
    rows = read_rows(str(f))
    assert [r.label for r in rows] == ["mtp_h96_b8_q4_kv342305", "q8_ctx900k"]
    assert rows[1].shape == parse_shape("q8_ctx900k").name
    assert len(read_rows("decode-h200")) >= 8
    f.write_text("q8_ctx900k\nq8_zz\n", encoding="utf-8")
    with pytest.raises(TraceattrError, match=r"rows.txt:2: .*'zz'"):
        read_rows(str(f))
    f.write_text("q8_ctx900k\nq8_ctx900k_h16\n", encoding="utf-8")
    with pytest.raises(TraceattrError, match=r"rows.txt:2: .* same shape"):
        read_rows(str(f))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rows", "nope", "--baseline", "a", "--candidate", "b"], "neither a file nor a named set"),
        (["--rows", "smoke", "--baseline", "fa3", "--candidate", "fa3"], "both 'fa3'"),
        (["--rows", "smoke", "--baseline", "a", "--candidate", "b", "--between", "warm"], "got 'warm'"),
        (["--rows", "smoke", "--baseline", "fa3", "--candidate", "nosuch[x=1]"], "nosuch"),
        (["--rows", "smoke", "--baseline", "a"], "missing --candidate"),
        (["--rows", "smoke", "--baseline", "a", "--candidate", "b", "--min-clock", "1.5"], "fraction must lie"),
        (["--retry", "{tmp}/none.json"], "unreadable receipt"),
        (
            ["--retry", "{tmp}/none.json", "--iters", "50", "--graphs", "--captures", "2"],
            "drop --iters, --graphs (--captures",
        ),
    ],
)
def test_cli_errors_are_one_line(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["round", *(a.replace("{tmp}", str(tmp_path)) for a in args), "--dry-run"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_cli_dry_run_lists_the_captures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["round", "--rows", "smoke", "--baseline", BASE, "--candidate", CAND, "--sensitivity", "--captures", "2",
              "--out-root", str(tmp_path), "--dry-run"])  # fmt: skip
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "capture-1: ABBA, first arm fa3" in out and f"capture-2: ABBA, first arm {CAND}" in out
    assert "sensitivity: back to back" in out and not list(tmp_path.iterdir())
    assert "2 captures × 20–500 iterations (until each arm's median is within ±0.5%, 95%)" in out
    assert "host-released hold" in out and "µs per call" not in out


def test_arm_texts_and_labels(tmp_path: Path) -> None:
    # an A/A round: two labels for one program; the calls carry labels, the plan the arm texts
    plan = RoundPlan(rows=ROWS, baseline="fa3", candidate="again=fa3", folder=tmp_path / "aa")
    assert plan.labels == ("fa3", "again") and plan.requests()[1].arms == ("again=fa3", "fa3")
    header = plan.header()
    assert (header["baseline"], header["candidate"]) == ("fa3", "again")
    assert header["arms"] == {"baseline": "fa3", "candidate": "again=fa3"}
    assert RoundPlan(rows=ROWS, baseline="fa3", candidate="fa3[splits=4]", folder=tmp_path).labels[1] == CAND


@pytest.mark.slow
def test_report_has_a_round_section(tmp_path: Path) -> None:
    from traceattr.present.report import build_report

    caps = captures(tmp_path, timing(0.9), count=2)
    receipt = Receipt({"baseline": BASE, "candidate": "<b>cand</b>"}, round_rows(ROWS, caps, BASE, CAND))
    att = attribute(load_trace(next(tmp_path.glob("capture0_abba.sqlite"))))
    page = build_report(att, receipt=receipt)
    assert 'id="round"' in page and "&lt;b&gt;cand&lt;/b&gt;" in page and "<b>cand</b>" not in page
    assert "2 / 2 rows pass" in page


@pytest.mark.slow
def test_cli_round_through_profile_with_a_fake_capture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole command on CPU: make_plan's real plans, traceattr.jobs.profile.execute replaced by a synthetic capture."""
    import traceattr.jobs.profile as profile

    plans = []

    def fake_execute(plan, on_line=None, *, report=True):  # type: ignore[no-untyped-def]
        assert not report  # the round writes one report.html, with its receipt
        plans.append(plan)
        plan.folder.mkdir(parents=True)
        for shape in plan.run.shapes:
            on_line(Progress.timing_of(shape, f"2 arms × {plan.run.iters} calls").line)
        index = len(plans) - 1
        cap = synth_capture(plan.folder, index, plan.backends, timing(0.9, seed=index), order=plan.run.order,
                            name="trace.sqlite")  # fmt: skip
        return profile.ProfileResult(plan.folder, cap.attribution, cap.calls, pl.DataFrame(), cap.runner, ())  # type: ignore[arg-type]

    monkeypatch.setattr(profile, "execute", fake_execute)
    monkeypatch.setattr(profile, "require_runnable", lambda plan: None)  # the round checks the GPU first
    with pytest.raises(SystemExit) as exit_info:
        main(["round", "--rows", "smoke", "--baseline", BASE, "--candidate", "fa3[splits=4]", "--iters", "8",
              "--sensitivity", "--between", "flush+fa2", "--out-root", str(tmp_path),
              "--fail-on", "refused", "--fail-on", f"loses:{BASE}"])  # fmt: skip
    # the candidate is 10% faster on every row: the receipt is written, then the CI gate fails on the baseline
    assert exit_info.value.code == 3
    captured = capsys.readouterr()
    assert f"fail: --fail-on loses:{BASE}: {BASE} is really slower than the winner at" in captured.err
    # what reached the runner: arm order alternating, ABBA then back to back, the predecessor for every call
    assert [(p.run.arms, p.run.order) for p in plans] == [
        ((BASE, CAND), "abba"),
        ((CAND, BASE), "abba"),
        ((BASE, CAND), "abba"),
        ((BASE, CAND), "blocked"),
    ]
    assert {p.run.between for p in plans} == {"flush+fa2"} and {p.run.iters for p in plans} == {8}
    assert {(p.run.max_noise, p.run.max_iters, p.run.hold_us) for p in plans} == {(0.005, 500, 100.0)}  # defaults
    (folder,) = tmp_path.iterdir()
    assert sorted(f.name for f in folder.iterdir()) == [
        "capture-1",
        "capture-2",
        "capture-3",
        "receipt.csv",
        "receipt.json",
        "receipt.md",
        "report.html",
        "sensitivity",
    ]
    out = captured.out
    assert out.index("Round receipt") < out.index("2 / 2 rows pass") and "q1_ctx8k" in out and "receipt.md" in out
    receipt = read_receipt(folder)
    assert receipt.header["protocol"]["between"] == "flush+fa2" and receipt.rows["verdict"].to_list() == ["faster"] * 2
    assert receipt.rows["sensitivity"].is_not_null().all() and receipt.header["protocol"]["flush_bytes"] == 256 << 20
    assert 'id="round"' in (folder / "report.html").read_text(encoding="utf-8")


# -- every refusal diagnosed from the captures (issue 17, item 3) --------------------------------
TIGHT = Gates(directional_limit=1e-6)  # refuses every row, so that each mechanism's diagnosis shows alone


def diagnosed(caps: list[Capture], gates: Gates = TIGHT, lead: bool = False) -> dict[str, dict[str, Any]]:
    from traceattr.present.receipt import with_causes

    header = {"baseline": BASE, "candidate": CAND, "gates": {"directional_limit": 0.02, "min_clock": 0.7},
              "protocol": {"lead": lead}}  # fmt: skip
    return by_row(with_causes(Receipt(header, round_rows(ROWS, caps, BASE, CAND, gates))).rows)


@pytest.mark.slow
def test_cause_host_bound_counts_per_arm_and_capture_with_the_holds_numbers(tmp_path: Path) -> None:
    # round 1: every candidate call's merge was launched 40 µs late (the host fell behind the GPU)
    late = captures(tmp_path, timing(1.0), count=1, gaps=lambda _s, arm, _i: 40 * US if arm == CAND else 0,
                    hold={"groups": 8, "timeouts": 2, "gpu_wait_us": {"median": 480.0, "max": 900.0}})  # fmt: skip
    caps = [*late, *captures(tmp_path, timing(1.0), count=3)[1:]]
    r = diagnosed(caps)[ROWS[0].label]
    assert "host-bound" in r["causes"] and r["status"] == "refused"
    assert f"host-bound: 8 / 8 {CAND} calls in capture 1" in r["refused_by"]  # a gate of its own
    assert r["host_bound_candidate"] == [8, 0, 0] and r["host_bound_baseline"] == [0, 0, 0]
    assert r["calls_captures"] == [8, 8, 8] and r["hold_timeouts"] == 2 and r["hold_gpu_wait_us"] == 480.0
    assert f"host-bound: {CAND} 8 / 8 in capture 1 calls waited for their own launches" in r["cause"]
    assert "the hold timed out 2 times" in r["cause"] and "GPU waited 480.0 µs per group" in r["cause"]
    assert "fix: --graphs" in r["cause"]
    assert "drift" in r["causes"]  # round 1's candidate median moved by the gap too: both are shown


@pytest.mark.slow
def test_cause_predecessor_split_with_intervals(tmp_path: Path) -> None:
    # the candidate is 8% faster after itself (first in its ABBA group) than after the baseline
    plain = timing(1.0)

    def t(shape: str, arm: str, i: int, pos: int) -> float:
        return plain(shape, arm, i, pos) * (0.92 if arm == CAND and pos == 0 else 1.0)

    r = diagnosed(captures(tmp_path, t), Gates())[ROWS[0].label]
    assert r["status"] == "refused" and r["causes"][0] == "predecessor"
    med, low, high = r["candidate_after_other"]
    assert low <= med <= high and med / r["candidate_after_self"][0] == pytest.approx(1 / 0.92, rel=0.01)
    assert r["baseline_after_other"][0] / r["baseline_after_self"][0] == pytest.approx(1.0, abs=0.01)
    assert re.search(rf"predecessor: fa3 [\d.]+ \[[\d.]+, [\d.]+\] µs after the other arm .* \([+-]0\.\d% \(within "
                     rf"noise\)\); {re.escape(CAND)} [\d.]+ \[.*\] µs after the other arm vs [\d.]+ \[.*\] µs after "
                     rf"itself \(\+8\.\d%\)", r["cause"])  # fmt: skip
    # behind a lead call every timed call followed the other arm: the same split is the position in the group
    led = diagnosed(captures(tmp_path, t), Gates(), lead=True)[ROWS[0].label]
    assert led["causes"][0] == "predecessor" and "after itself" not in led["cause"]
    assert re.search(rf"position in the group: .*{re.escape(CAND)} [\d.]+ \[.*\] µs as the second call of its group "
                     rf"vs [\d.]+ \[.*\] µs as the first \(\+8\.\d%\)", led["cause"])  # fmt: skip


@pytest.mark.slow
def test_cause_clock(tmp_path: Path) -> None:
    caps = [*captures(tmp_path, timing(0.9), count=2), synth_capture(tmp_path, 2, (BASE, CAND), timing(0.9),
                                                                     fraction=0.5)]  # fmt: skip
    r = diagnosed(caps, Gates())[ROWS[0].label]
    assert r["causes"] == ["clock"]
    assert (
        "clock: the SM clock ran at 50.0% of its maximum (990 MHz) while the row was timed, below 70.0%" in r["cause"]
    )


@pytest.mark.slow
def test_cause_drift_across_rounds(tmp_path: Path) -> None:
    caps = [synth_capture(tmp_path, 0, (BASE, CAND), timing(1.0)),
            synth_capture(tmp_path, 1, (CAND, BASE), timing(1.3)),  # the candidate 30% slower in one capture
            synth_capture(tmp_path, 2, (BASE, CAND), timing(1.0))]  # fmt: skip
    r = diagnosed(caps)[ROWS[0].label]
    assert "drift" in r["causes"] and "host-bound" not in r["causes"] and "predecessor" not in r["causes"]
    assert re.search(rf"drift across captures: {re.escape(CAND)}'s per-capture medians \d+\.\d\d, 1[23]\d\.\d\d, "
                     r"\d+\.\d\d µs \(3\d\.\d% apart\)", r["cause"])  # fmt: skip


@pytest.mark.slow
def test_cause_bimodal(tmp_path: Path) -> None:
    # every third candidate call 10% slower, whatever ran before it
    plain = timing(1.0)

    def t(shape: str, arm: str, i: int, pos: int) -> float:
        return plain(shape, arm, i, pos) * (1.10 if arm == CAND and i % 3 == 0 else 1.0)

    r = diagnosed(captures(tmp_path, t, iters=12))[ROWS[0].label]
    assert "bimodal" in r["causes"] and r["baseline_modes"] is None
    low, high, share = r["candidate_modes"]
    assert high / low == pytest.approx(1.10, rel=0.01) and share == pytest.approx(1 / 3, abs=0.01)
    assert f"bimodal: {CAND}'s calls fall in two groups, " in r["cause"] and "(33% in the slower)" in r["cause"]


@pytest.mark.slow
def test_cause_none_found_still_gives_the_numbers(tmp_path: Path) -> None:
    r = diagnosed(captures(tmp_path, timing(0.9)))[ROWS[0].label]
    assert r["causes"] == [] and r["cause"].startswith("no mechanism shows in the captures")
    assert "per-capture medians" in r["cause"] and "directional 0.0" in r["cause"]


@pytest.mark.slow
def test_causes_travel_in_every_receipt_file_and_only_for_refused_rows(tmp_path: Path) -> None:
    plan = RoundPlan(rows=ROWS, baseline=BASE, candidate=CAND, folder=tmp_path / "round", captures=2)
    caps = [synth_capture(tmp_path, 0, (BASE, CAND), timing(0.9)),
            synth_capture(tmp_path, 1, (CAND, BASE), timing(0.9), fraction=0.5)]  # fmt: skip
    it = iter(caps)
    receipt = run_round(plan, lambda request, plan, on_line: next(it))
    md = (plan.folder / "receipt.md").read_text(encoding="utf-8")
    assert (
        "Why each refused row was refused" in md and "- **q1_ctx8k** (16 ABBA iterations over 2 captures): clock" in md
    )
    csv = pl.read_csv(plan.folder / "receipt.csv")
    assert (
        csv["cause"].str.starts_with("clock: the SM clock ran at 50.0%").all()
        and csv["causes"].to_list() == ["clock"] * 2
    )
    assert csv["candidate_after_self"][0].count(";") == 2
    back = read_receipt(plan.folder)
    assert back.rows["cause"].to_list() == receipt.rows["cause"].to_list()
    ok = with_causes_of(Receipt(receipt.header, round_rows(ROWS, caps[:1], BASE, CAND)))
    assert ok.rows["status"].to_list() == ["pass"] * 2 and ok.rows["cause"].is_null().all()


def with_causes_of(receipt: Receipt) -> Receipt:
    from traceattr.present.receipt import with_causes

    return with_causes(receipt)


# what receipts gained with causes (b64396d): absent from every receipt written before
_ROW_KEYS_ADDED_WITH_CAUSES = (
    "causes", "cause", "stopped", "baseline_after_self", "baseline_after_other", "candidate_after_self",
    "candidate_after_other", "baseline_modes", "candidate_modes", "host_bound_baseline", "host_bound_candidate",
    "calls_captures", "hold_timeouts", "hold_gpu_wait_us",
)  # fmt: skip
_PROTOCOL_KEYS_ADDED_SINCE = ("hold", "lead")  # the hold as on/off (b64396d), the lead call (dd2131b)


def previous_version_round(tmp_path: Path) -> Path:
    """A round folder as the version before causes left it: both rows refused (an order effect), the
    captures on disk, receipt.json without the columns and protocol keys added since (its hold the old
    fixed spin of 100 µs per call)."""
    fake = FakeExecutor(tmp_path, timing(0.9, first_bias=0.05))
    plan = RoundPlan(rows=ROWS, baseline=BASE, candidate=CAND, folder=tmp_path / "round")
    run_round(plan, fake)
    path = plan.folder / f"{runfolder.RECEIPT}.json"
    content = json.loads(path.read_text())
    content["rows"] = [{k: v for k, v in r.items() if k not in _ROW_KEYS_ADDED_WITH_CAUSES} for r in content["rows"]]
    content["protocol"] = {k: v for k, v in content["protocol"].items() if k not in _PROTOCOL_KEYS_ADDED_SINCE}
    assert content["protocol"]["hold_us"] == 100.0 and "hold" not in content["runner"]["protocol"]
    path.write_text(json.dumps(content))
    (plan.folder / runfolder.REPORT).write_text("<html>the previous version's page</html>")
    return plan.folder


def test_a_receipt_written_before_causes_still_reads(tmp_path: Path) -> None:
    content = json.loads((previous_version_round(tmp_path) / f"{runfolder.RECEIPT}.json").read_text())
    receipt = Receipt.from_json(content)
    assert receipt.rows["cause"].is_null().all() and receipt.rows["causes"].is_null().all()
    md = markdown(receipt)
    assert "not diagnosed: this receipt was written before traceattr recorded causes" in md
    assert "GPU held 100 µs per call while each group is enqueued (fixed spin)" in md


# -- a stopping rule that does not burn the budget (item 5) --------------------------------------
@pytest.mark.slow
def test_a_refusal_not_yet_certain_measures_every_round(tmp_path: Path) -> None:
    fake = FakeExecutor(tmp_path, timing(0.9, first_bias=0.02))  # directional ≈ 0.04: refused, not 3× the limit
    plan = RoundPlan(rows=ROWS, baseline=BASE, candidate=CAND, folder=tmp_path / "round")
    receipt = run_round(plan, fake)
    assert len(fake.requests) == 3 and receipt.rows["status"].to_list() == ["refused"] * 2
    assert receipt.rows["stopped"].is_null().all() and receipt.rows["captures"].to_list() == [3, 3]


@pytest.mark.slow
def test_only_the_decided_row_stops(tmp_path: Path) -> None:
    from traceattr.analysis.rounds import certain_refusals

    biased, plain = timing(0.9, first_bias=0.05), timing(0.9)

    def t(shape: str, arm: str, i: int, pos: int) -> float:  # the first row's order effect only
        return (biased if shape == ROWS[0].shape else plain)(shape, arm, i, pos)

    fake = FakeExecutor(tmp_path, t)
    plan = round_plan(rows=ROWS, baseline=BASE, candidate=CAND, folder=tmp_path / "round", sensitivity=True)
    receipt = run_round(plan, fake)
    assert [r.shapes for r in fake.requests] == [(ROWS[0].shape, ROWS[1].shape)] * 2 + [(ROWS[1].shape,)] * 2
    rows = by_row(receipt.rows)
    assert rows[ROWS[0].label]["captures"] == 2 and rows[ROWS[0].label]["arms_gate"] == "pass"
    assert rows[ROWS[1].label]["captures"] == 3 and rows[ROWS[1].label]["status"] == "pass"
    assert rows[ROWS[1].label]["sensitivity"] is not None and rows[ROWS[0].label]["sensitivity"] is None
    # one capture is never enough, whatever it shows; a failed clock is final
    one = captures(tmp_path, t, count=1)
    assert certain_refusals(ROWS, one, BASE, CAND) == {}
    low = [*one, synth_capture(tmp_path, 1, (CAND, BASE), timing(0.9), fraction=0.5)]
    assert (
        certain_refusals(ROWS, low, BASE, CAND)[ROWS[1].label] == "refusal certain after 2 captures (clock gate failed)"
    )


def test_the_runners_noise_loop_stops_when_more_calls_cannot_help() -> None:
    from traceattr.runner.plan import HOPELESS_DIRECTIONAL, RunPlan, event_directional, more_iterations

    plan = RunPlan(shapes=("s",), arms=("a", "b"), iters=20, max_noise=0.005, max_iters=500)
    noisy = {"a": 0.02, "b": 0.03}
    assert more_iterations(20, noisy, plan) == 10  # the noise rule alone: ten more
    assert more_iterations(20, noisy, plan, host_waited=True) == 0  # the hold timed out: the host sets the spread
    assert more_iterations(20, noisy, plan, directional=HOPELESS_DIRECTIONAL * 2) == 0
    assert more_iterations(20, noisy, plan, directional=0.05) == 10  # refused maybe, but not hopeless
    assert more_iterations(10, noisy, plan, directional=1.0) == 10  # never before the minimum --iters
    # ABBA: round r runs a then b on even r; b is 20% faster when it runs first (odd rounds)
    times = {"a": [100.0] * 6, "b": [100.0, 80.0] * 3}
    assert event_directional(times, ("a", "b")) == pytest.approx(0.2)
    assert (
        event_directional({"a": [1.0]}, ("a",)) is None
        and event_directional({"a": [1.0], "b": [1.0]}, ("a", "b")) is None
    )


# -- the hold as it ran (item 4) -------------------------------------------------------------------
def test_protocol_text_says_how_the_gpu_was_held() -> None:
    from traceattr.present.receipt import protocol_text

    base = {"protocol": {"captures": 3, "iters": 20, "flush_bytes": 128 << 20}, "gates": {}}
    ran = {**base, "runner": {"protocol": {"hold": "host", "flush_kind": "fill+evict", "hold_us": 100.0}}}
    text = protocol_text(ran)
    assert "host-released hold" in text and "128 MiB L2 flush, a fill, then reads that evict" in text
    assert "µs per call" not in text
    assert "no hold" in protocol_text({**base, "runner": {"protocol": {"hold": "none"}}})
    legacy = {**base, "protocol": {**base["protocol"], "hold_us": 100.0}}  # before the runner said
    assert "GPU held 100 µs per call while each group is enqueued (fixed spin)" in protocol_text(legacy)
    planned = {**base, "protocol": {**base["protocol"], "hold": False, "hold_us": 0.0}}
    assert "no hold" in protocol_text(planned)


@pytest.mark.parametrize(("args", "hold"), [([], True), (["--no-hold"], False), (["--hold-us", "0"], False),
                                            (["--hold-us", "100"], True)])  # fmt: skip
def test_cli_hold_is_on_or_off(args: list[str], hold: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["round", "--rows", "smoke", "--baseline", BASE, "--candidate", CAND, "--out-root", str(tmp_path),
              "--dry-run", *args])  # fmt: skip
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert ("host-released hold" in out) == hold and ("no hold" in out) == (not hold)


# -- the round's page leads with its receipt (item 6) ----------------------------------------------
SWEEP = (Row("q1_ctx8k", parse_shape("q1_ctx8k").name), Row("q1_ctx131k", parse_shape("q1_ctx131k").name))


def sweep_timing(first_bias_long: float) -> Timing:
    """The candidate 20% faster at 8k and 25% slower at 131k: a decided rule between them."""
    short, long = timing(0.8, noise=0.001), timing(1.25, first_bias=first_bias_long, noise=0.001, seed=1)
    return lambda shape, arm, i, pos: (short if shape == SWEEP[0].shape else long)(shape, arm, i, pos)


@pytest.mark.slow
@pytest.mark.parametrize("refused", [False, True])
def test_round_page_never_draws_a_rule_through_a_refused_row(tmp_path: Path, refused: bool) -> None:
    from traceattr.jobs.round import write_round_report

    t = sweep_timing(0.05 if refused else 0.0)
    caps = [synth_capture(tmp_path, r, (BASE, CAND) if r % 2 == 0 else (CAND, BASE), t, rows=SWEEP, name=f"c{r}.sqlite")
            for r in range(3)]  # fmt: skip
    plan = RoundPlan(rows=SWEEP, baseline=BASE, candidate=CAND, folder=tmp_path / "round")
    receipt = with_causes_of(Receipt(plan.header(), round_rows(SWEEP, caps, BASE, CAND)))
    assert receipt.rows["status"].to_list() == (["pass", "refused"] if refused else ["pass", "pass"])
    plan.folder.mkdir()
    page = write_round_report(receipt, plan.folder, first=caps[0]).read_text(encoding="utf-8")  # type: ignore[union-attr]
    order = [page.index(f'id="{s}"') for s in ("round", "evidence", "numbers", "context", "metadata")]
    assert order == sorted(order)  # the receipt first, the first capture's figures after, metadata last
    assert "<details open>" not in page and "(first capture)" in page and "first capture only" in page
    drawn = '"name":"rule"' in page
    assert drawn is not refused
    if refused:  # the first capture's rule (decided there) is nowhere; the round's decision says why there is none
        assert f"{CAND} below ≈" not in page and "<b>q1_ctx*</b>: no rule: the round refused 131k (directional" in page
        assert "Why each refused row was refused" in page and "position in the group: fa3" in page
        assert "fa3 first / second in group" in page
    assert page.index("rows pass") < page.index('id="metadata"')


@pytest.mark.slow
def test_a_rule_missing_for_a_refused_row_is_not_blamed_on_noise(tmp_path: Path) -> None:
    """At 131k the first capture ties within noise and the round refuses the row (the order gate): the page's
    decision and the context chart's note name the refused row and its gate, from the round's one decision record,
    and say nothing of noise for that family or that row."""
    from traceattr.analysis.round_decision import receipt_decision
    from traceattr.jobs.round import write_round_report
    from traceattr.present.verdicts import verdict_lines

    short, long = timing(0.8, noise=0.001), timing(1.03, first_bias=0.05, noise=0.01, seed=1)
    t = lambda shape, arm, i, pos: (short if shape == SWEEP[0].shape else long)(shape, arm, i, pos)  # noqa: E731
    caps = [synth_capture(tmp_path, r, (BASE, CAND) if r % 2 == 0 else (CAND, BASE), t, rows=SWEEP, name=f"c{r}.sqlite")
            for r in range(3)]  # fmt: skip
    plan = RoundPlan(rows=SWEEP, baseline=BASE, candidate=CAND, folder=tmp_path / "round")
    receipt = with_causes_of(Receipt(plan.header(), round_rows(SWEEP, caps, BASE, CAND)))
    assert receipt.rows["status"].to_list() == ["pass", "refused"]
    gate = receipt.rows["refused_by"][1]
    assert gate.startswith("directional")
    decision = receipt_decision(receipt, "round")
    (family,) = decision.families
    assert [(r.shape, r.ctx, r.why) for r in family.refused] == [(SWEEP[1].shape, 131_000, gate)]
    assert f"q1_ctx*: no rule: the round refused 131k ({gate}); {CAND} at 8k" in verdict_lines(decision)
    plan.folder.mkdir()
    page = write_round_report(receipt, plan.folder, first=caps[0]).read_text(encoding="utf-8")  # type: ignore[union-attr]
    part = page[page.index('id="decision"') : page.index('id="attribution"')]
    part = re.sub(
        r'<script.*?</script>|<p class="intro">.*?</p>', "", part, flags=re.S
    )  # what it says, not how to read
    said = html.unescape(re.sub(r"<[^>]+>", "", part))
    assert said.count(f"q1_ctx*: no rule: the round refused 131k ({gate})") == 2  # the decision, the chart's note
    assert "noise" not in said and "tie" not in said, said
    assert f"{SWEEP[1].shape}: {gate}" in said  # the refused row with its gate, as the terminal lists it


@pytest.mark.slow
def test_report_of_a_round_folder_written_by_the_previous_version(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    folder = previous_version_round(tmp_path)
    (folder / runfolder.REPORT).unlink()
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(folder)])
    assert exit_info.value.code in (0, None)
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert page.index('id="round"') < page.index('id="evidence"') < page.index('id="metadata"')
    assert page.index("0 / 2 rows pass") < page.index('id="metadata"') and "<details open>" not in page
    assert "not diagnosed: this receipt was written before traceattr recorded causes" in page
    assert '"name":"rule"' not in page


@pytest.mark.slow
def test_both_arm_orders_weigh_alike_however_many_captures_each_had(tmp_path: Path) -> None:
    """The H200 A/A at q1_ctx8k: the arm listed first in its capture ran 2% faster; with 3 captures (the
    baseline first in two) the median over rounds read 1.015 "slower". Each order now weighs the same."""
    plain = timing(1.0, noise=0.001)
    caps = []
    for r in range(3):
        order = (BASE, CAND) if r % 2 == 0 else (CAND, BASE)

        def t(shape: str, arm: str, i: int, pos: int, first: str = order[0]) -> float:
            return plain(shape, arm, i, pos) * (0.98 if arm == first else 1.0)

        caps.append(synth_capture(tmp_path, r, order, t))
    r = by_row(round_rows(ROWS, caps, BASE, CAND))[ROWS[0].label]
    assert r["ratio"] == pytest.approx(1.0, abs=0.002) and r["verdict"] == "same", r
    # per capture the candidate is 2% slower, faster, slower: the evidence keeps what each capture measured
    per_round = [c / b for b, c in zip(r["baseline_captures_us"], r["candidate_captures_us"], strict=True)]
    assert per_round == [pytest.approx(1 / 0.98, abs=0.003), pytest.approx(0.98, abs=0.003),
                         pytest.approx(1 / 0.98, abs=0.003)]  # fmt: skip
    # one order only (a single capture): the plain median of the pairs, as before
    one = by_row(round_rows(ROWS, caps[:1], BASE, CAND))[ROWS[0].label]
    assert one["ratio"] == pytest.approx(1 / 0.98, abs=0.003) and one["verdict"] == "slower"


@pytest.mark.slow
def test_host_bound_calls_refuse_a_row_the_other_gates_pass(tmp_path: Path) -> None:
    """One capture in which 2 of 8 candidate calls waited for their launches (25% > 5%): refused, even though
    order and drift stay far below their limits; 0 of 8 passes."""

    def gaps(_s: str, arm: str, i: int) -> int:
        return 15 * US if arm == CAND and i in (2, 5) else 0  # two calls of eight: the medians barely move

    caps = [*captures(tmp_path, timing(0.9), count=1, gaps=gaps), *captures(tmp_path, timing(0.9), count=3)[1:]]
    r = by_row(round_rows(ROWS, caps, BASE, CAND))[ROWS[0].label]
    assert r["directional_gate"] == "pass" and r["status"] == "refused", r
    assert r["refused_by"] == f"host-bound: 2 / 8 {CAND} calls in capture 1"
    clean = by_row(round_rows(ROWS, captures(tmp_path, timing(0.9), count=3), BASE, CAND))[ROWS[0].label]
    assert clean["status"] == "pass" and clean["host_bound_candidate"] == [0, 0, 0]


@pytest.mark.slow
def test_report_of_a_round_folder_whose_traces_are_gone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """receipt.json alone still makes the page: the receipt first, its evidence, the header folded; no figures."""
    plan = RoundPlan(rows=ROWS, baseline=BASE, candidate=CAND, folder=tmp_path / "round")
    run_round(plan, FakeExecutor(tmp_path, timing(0.9)))
    for trace in plan.folder.rglob("trace.sqlite"):  # (the fake's captures name theirs otherwise)
        trace.unlink()
    (plan.folder / "report.html").unlink(missing_ok=True)
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(plan.folder)])
    assert exit_info.value.code in (0, None)
    assert "no capture has its trace.sqlite: the receipt and its evidence only" in capsys.readouterr().err
    page = (plan.folder / "report.html").read_text(encoding="utf-8")
    assert page.index('id="round"') < page.index('id="evidence"') < page.index('id="metadata"')
    assert page.index("2 / 2 rows pass") < page.index('id="evidence"') and "<details open>" not in page
    assert "captures has its trace.sqlite any more" in page and "Plotly.newPlot" not in page


def test_captures_has_its_old_name(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # --rounds was the option's name before a round's nsys runs were called captures: both plan the same  # /1 names
    args = [
        "round",
        "--rows",
        "smoke",
        "--baseline",
        BASE,
        "--candidate",
        CAND,
        "--dry-run",
        "--out-root",
        str(tmp_path),
    ]
    outs = []
    for flag in ("--captures", "--rounds"):  # /1 names
        with pytest.raises(SystemExit) as done:
            main([*args, flag, "2"])
        assert done.value.code in (0, None)
        outs.append([line for line in capsys.readouterr().out.splitlines() if "capture-" in line])
    assert outs[0] == outs[1] and [line.split(":")[0].strip() for line in outs[0]] == ["capture-1", "capture-2"]
