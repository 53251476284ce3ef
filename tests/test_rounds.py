"""traceattr round on CPU: receipts from constructed traces (tests.synth) and constructed runner.json files."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.helpers import BASE, CAND, ROWS, FakeExecutor, captures, synth_capture, timing
from traceattr.analysis.rounds import Gates, Receipt, round_rows
from traceattr.attribution.engine import attribute
from traceattr.cli import main
from traceattr.core.errors import TraceattrError
from traceattr.core.precision import median_noise
from traceattr.core.shapes import parse_shape
from traceattr.jobs.round import RoundPlan, read_receipt, read_rows, retry_plan, run_round
from traceattr.present.receipt import markdown
from traceattr.trace.loader import load_trace


def by_row(frame: pl.DataFrame) -> dict[str, dict[str, Any]]:
    return {r["row"]: r for r in frame.iter_rows(named=True)}


# -- verdicts and headline numbers -----------------------------------------------------------
@pytest.mark.parametrize(("ratio", "noise", "verdict"), [(0.90, 0.002, "faster"), (1.10, 0.002, "slower"),
                                                         (1.0, 0.002, "same"), (1.0, 0.15, "ambiguous")])  # fmt: skip
def test_verdict_classes(tmp_path: Path, ratio: float, noise: float, verdict: str) -> None:
    rows = round_rows(ROWS, captures(tmp_path, timing(ratio, noise=noise)), BASE, CAND, Gates(directional_limit=1.0))
    got = by_row(rows)
    for row in ROWS:
        r = got[row.label]
        assert r["verdict"] == verdict, r
        assert r["pairs"] == 3 * 8 and r["rounds"] == 3 and len(r["baseline_rounds_us"]) == 3
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


def test_one_slow_round_clock_is_the_rows_clock(tmp_path: Path) -> None:
    t = timing(0.9)
    caps = [synth_capture(tmp_path, 0, (BASE, CAND), t), synth_capture(tmp_path, 1, (CAND, BASE), t, fraction=0.5)]
    r = by_row(round_rows(ROWS, caps, BASE, CAND))[ROWS[0].label]
    assert r["clock_fraction"] == 0.5 and r["clock_gate"] == "fail"


def test_output_parity(tmp_path: Path) -> None:
    t = timing(1.0)
    same = by_row(round_rows(ROWS, captures(tmp_path, t, rounds=2), BASE, CAND))
    assert all(r["parity"] == "bitwise" and r["parity_gate"] == "pass" for r in same.values())
    differ = by_row(round_rows(ROWS, captures(tmp_path, t, rounds=2, sha=("ab" * 32, "cd" * 32)), BASE, CAND))
    assert all(
        r["parity_gate"] == "fail" and "parity (bitwise): outputs differ" in r["refused_by"] for r in differ.values()
    )
    nosha = by_row(round_rows(ROWS, captures(tmp_path, t, rounds=2, sha=("ab" * 32, None)), BASE, CAND))
    assert all(r["parity_gate"] == "not measured" for r in nosha.values())
    # different programs: bitwise is not expected; both arms passed the reference check
    other = by_row(round_rows(ROWS, captures(tmp_path, t, rounds=2, program=("fa3", "fa3+merge"),
                                             sha=("ab" * 32, "cd" * 32)), BASE, CAND))  # fmt: skip
    assert all(r["parity"] == "reference" and r["parity_gate"] == "pass" for r in other.values())
    off = by_row(round_rows(ROWS, captures(tmp_path, t, rounds=2, sha=("ab" * 32, "cd" * 32)), BASE, CAND,
                            Gates(parity=False)))  # fmt: skip
    assert all(r["parity_gate"] == "off" and r["status"] == "pass" for r in off.values())


def test_an_arm_that_did_not_run_refuses_the_row(tmp_path: Path) -> None:
    t = timing(0.9)
    caps = [synth_capture(tmp_path, 0, (BASE, CAND), t), synth_capture(tmp_path, 1, (CAND, BASE), t, skip={CAND})]
    r = by_row(round_rows(ROWS, caps, BASE, CAND))[ROWS[0].label]
    assert r["arms_gate"] == "fail" and r["status"] == "refused"
    assert f"{CAND} in round 2: split-KV needs ctx ≥ 16k" in r["refused_by"]
    assert r["rounds"] == 2 and len(r["candidate_rounds_us"]) == 1


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


def test_receipt_discloses_the_sampling(tmp_path: Path) -> None:
    """Iterations per round come from the calls; the spans' median noise is shown where it missed the target."""
    steady, noisy = timing(1.0, noise=0.002), timing(1.0, noise=0.03, seed=1)
    caps = [
        synth_capture(tmp_path, 0, (BASE, CAND), steady, iters=8),
        synth_capture(tmp_path, 1, (CAND, BASE), noisy, iters=12),
        synth_capture(tmp_path, 2, (BASE, CAND), steady, iters=8),
    ]
    rows = by_row(round_rows(ROWS, caps, BASE, CAND))
    r = rows[ROWS[0].label]
    assert r["iters_rounds"] == [8, 12, 8] and r["pairs"] == 28
    mine = (pl.col("backend") == BASE) & (pl.col("shape") == ROWS[0].shape)
    noisy_spans = caps[1].calls.filter(mine)["gpu_span_ns"].to_numpy()  # the noisy round's baseline, first row
    assert r["noise"] >= median_noise(noisy_spans) > 0.005  # the worst arm and round, here the noisy one
    header = RoundPlan(rows=ROWS, baseline=BASE, candidate=CAND, folder=tmp_path / "r", max_noise=0.005,
                       max_iters=500).header()  # fmt: skip
    receipt = Receipt(header, round_rows(ROWS, caps, BASE, CAND))
    md = markdown(receipt)
    assert "3 rounds × 20–500 iterations (until each arm's median is within ±0.5%, 95%)" in md
    assert "GPU held 100 µs per call while each group is enqueued" in md
    assert len(re.findall(r"median noise ±\d\.\d\d% at 12 iterations", md)) == 2
    quiet = Receipt(header, round_rows(ROWS, [caps[0], caps[2]], BASE, CAND))
    assert "median noise" not in markdown(quiet) and quiet.rows["noise"].max() < 0.005
    assert receipt.csv_frame()["iters_rounds"].to_list()[0] == "8;12;8"
    assert Receipt.from_json(json.loads(json.dumps(receipt.to_json()))).rows.equals(receipt.rows)


def test_run_round_alternates_arms_and_writes_receipts(tmp_path: Path) -> None:
    fake = FakeExecutor(tmp_path, timing(0.9, first_bias=0.05))
    plan = RoundPlan(rows=ROWS, baseline=BASE, candidate=CAND, folder=tmp_path / "round", sensitivity=True,
                     rows_source="smoke")  # fmt: skip
    seen: list[str] = []
    receipt = run_round(plan, fake, on_progress=seen.append)
    assert [(r.round, r.arms[0], r.order) for r in fake.requests] == [
        (0, BASE, "abba"), (1, CAND, "abba"), (2, BASE, "abba"), (-1, BASE, "blocked")]  # fmt: skip
    assert len(seen) == len(ROWS) * 4 and seen[0].startswith("round 1: ") and seen[-1].startswith("back to back: ")
    assert receipt.summary()["passing"] == 0  # the first-arm bias refuses both rows
    md = (plan.folder / "receipt.md").read_text(encoding="utf-8")
    assert md.count("**refused**: directional") == 2 and "**0 / 2 rows pass**" in md
    assert "| row | baseline µs | candidate µs | ratio | verdict | gates |" in md
    csv = pl.read_csv(plan.folder / "receipt.csv")
    assert csv["row"].to_list() == [r.label for r in ROWS] and csv["status"].to_list() == ["refused"] * 2
    assert len(csv["baseline_rounds_us"][0].split(";")) == 3
    back = read_receipt(plan.folder / "receipt.json")
    assert back.rows.equals(receipt.rows) and back.header["protocol"]["between"] == "flush"
    assert back.header["gates"]["directional_limit"] == 0.02 and back.header["runner"]["protocol"]["order"] == "abba"


def test_retry_remeasures_only_refused_rows_and_keeps_both(tmp_path: Path) -> None:
    first = Receipt(
        RoundPlan(rows=ROWS, baseline=BASE, candidate=CAND, folder=tmp_path / "r0", max_noise=0.004,
                  max_iters=300).header(),
        round_rows(ROWS, [*captures(tmp_path, timing(0.9), rounds=2)[:1],
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
    plan = retry_plan(previous, tmp_path / "out", rounds=2)
    assert [r.label for r in plan.rows] == [ROWS[1].label] and plan.first_round == 3
    assert (plan.max_noise, plan.max_iters) == (0.004, 300)  # the retry samples as the round did
    fake = FakeExecutor(tmp_path, timing(0.9))
    merged = run_round(plan, fake, previous=previous)
    assert [r.round for r in fake.requests] == [3, 4] and fake.requests[0].arms[0] == CAND  # alternation continues
    assert merged.rows.height == 3
    attempts = merged.rows.filter(pl.col("row") == ROWS[1].label)
    assert attempts["attempt"].to_list() == [1, 2] and attempts["status"].to_list() == ["refused", "pass"]
    assert merged.summary()["passing"] == 2 and merged.header["retry_rounds"] == [2]
    md = markdown(merged)
    assert f"{ROWS[1].label} (attempt 1)" in md and f"{ROWS[1].label} (attempt 2)" in md and "**2 / 2 rows pass**" in md
    assert (tmp_path / "r0" / "receipt.json").read_bytes() == before  # inputs are never modified
    assert read_receipt(plan.folder).rows.height == 3
    with pytest.raises(TraceattrError, match="nothing to retry"):
        retry_plan(merged, tmp_path / "out")


def test_an_interrupted_round_has_no_receipt_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeExecutor(tmp_path, timing(0.9))

    def interrupted(request, plan, on_line):  # type: ignore[no-untyped-def]
        if request.round == 1:
            raise KeyboardInterrupt  # Ctrl-C during the second capture
        return fake(request, plan, on_line)

    plan = RoundPlan(rows=ROWS, baseline=BASE, candidate=CAND, folder=tmp_path / "round")
    with pytest.raises(KeyboardInterrupt):
        run_round(plan, interrupted, report=True)
    assert sorted(p.name for p in plan.folder.iterdir()) == ["round-1"]  # the capture is kept, no receipt
    with pytest.raises(TraceattrError, match="did not finish"):
        read_receipt(plan.folder)
    with pytest.raises(SystemExit) as exit_info:
        main(["round", "--retry", str(plan.folder)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "did not finish" in err and len(err.strip().splitlines()) == 1


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
    for folder in ("round-1", "round-2", "round-3"):
        shutil.rmtree(moved / folder)
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(moved)])
    assert exit_info.value.code == 2 and "none of the receipt's captures" in capsys.readouterr().err


def test_markdown_escapes_and_geomean_over_passing_rows_only(tmp_path: Path) -> None:
    rows = round_rows(ROWS, captures(tmp_path, timing(0.8)), BASE, CAND).with_columns(
        pl.when(pl.col("row") == ROWS[1].label).then(pl.lit("refused")).otherwise(pl.col("status")).alias("status"),
        pl.when(pl.col("row") == ROWS[1].label).then(pl.lit("clock 0.50 < 0.7")).otherwise(pl.lit("")).alias("refused_by"),
        pl.when(pl.col("row") == ROWS[1].label).then(pl.lit(0.5)).otherwise(pl.col("ratio")).alias("ratio"),
    )  # fmt: skip
    receipt = Receipt({"baseline": "x|y", "candidate": CAND, "protocol": {"rounds": 3}}, rows)
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
            ["--retry", "{tmp}/none.json", "--iters", "50", "--graphs", "--rounds", "2"],
            "drop --iters, --graphs (--rounds",
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
        main(["round", "--rows", "smoke", "--baseline", BASE, "--candidate", CAND, "--sensitivity", "--rounds", "2",
              "--out-root", str(tmp_path), "--dry-run"])  # fmt: skip
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "round-1: round 1, ABBA, first arm fa3" in out and f"round-2: round 2, ABBA, first arm {CAND}" in out
    assert "sensitivity: back to back" in out and not list(tmp_path.iterdir())
    assert "2 rounds × 20–500 iterations (until each arm's median is within ±0.5%, 95%)" in out
    assert "GPU held 100 µs per call" in out


def test_arm_texts_and_labels(tmp_path: Path) -> None:
    # an A/A round: two labels for one program; the calls carry labels, the plan the arm texts
    plan = RoundPlan(rows=ROWS, baseline="fa3", candidate="again=fa3", folder=tmp_path / "aa")
    assert plan.labels == ("fa3", "again") and plan.requests()[1].arms == ("again=fa3", "fa3")
    header = plan.header()
    assert (header["baseline"], header["candidate"]) == ("fa3", "again")
    assert header["arms"] == {"baseline": "fa3", "candidate": "again=fa3"}
    assert RoundPlan(rows=ROWS, baseline="fa3", candidate="fa3[splits=4]", folder=tmp_path).labels[1] == CAND


def test_report_has_a_round_section(tmp_path: Path) -> None:
    from traceattr.present.report import build_report

    caps = captures(tmp_path, timing(0.9), rounds=2)
    receipt = Receipt({"baseline": BASE, "candidate": "<b>cand</b>"}, round_rows(ROWS, caps, BASE, CAND))
    att = attribute(load_trace(next(tmp_path.glob("capture0_abba.sqlite"))))
    page = build_report(att, receipt=receipt)
    assert 'id="round"' in page and "&lt;b&gt;cand&lt;/b&gt;" in page and "<b>cand</b>" not in page
    assert "2 / 2 rows pass" in page


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
            on_line(f"[traceattr] timing {shape}: 2 arms × {plan.run.iters} calls")
        index = len(plans) - 1
        cap = synth_capture(plan.folder, index, plan.backends, timing(0.9, seed=index), order=plan.run.order,
                            name="trace.sqlite")  # fmt: skip
        return profile.ProfileResult(plan.folder, cap.attribution, cap.calls, pl.DataFrame(), cap.runner, ())  # type: ignore[arg-type]

    monkeypatch.setattr(profile, "execute", fake_execute)
    with pytest.raises(SystemExit) as exit_info:
        main(["round", "--rows", "smoke", "--baseline", BASE, "--candidate", "fa3[splits=4]", "--iters", "8",
              "--sensitivity", "--between", "flush+fa2", "--out-root", str(tmp_path)])  # fmt: skip
    assert exit_info.value.code in (0, None)
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
        "receipt.csv",
        "receipt.json",
        "receipt.md",
        "report.html",
        "round-1",
        "round-2",
        "round-3",
        "sensitivity",
    ]
    out = capsys.readouterr().out
    assert "**2 / 2 rows pass**" in out and "| q1_ctx8k |" in out
    receipt = read_receipt(folder)
    assert receipt.header["protocol"]["between"] == "flush+fa2" and receipt.rows["verdict"].to_list() == ["faster"] * 2
    assert receipt.rows["sensitivity"].is_not_null().all() and receipt.header["protocol"]["flush_bytes"] == 256 << 20
    assert 'id="round"' in (folder / "report.html").read_text(encoding="utf-8")
