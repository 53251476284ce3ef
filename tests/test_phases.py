"""traceattr.phases: the stamp reader, alignment with nsys (offset, skew, reordered stamps, missing CTAs), phase math;
and its surfaces: the terminal table, the verdict lines, the round's markdown, bad input (exit 2)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from rich.console import Console

from tests.helpers import cli, one_line
from tests.synth.stamped import INKERNEL, REDUCE, ROWS, SKEW_PPM, SPLIT_BOUNDS, stamped_folder, stamped_round
from traceattr.cli.phases import main
from traceattr.core.callnames import DOMAIN, CallName
from traceattr.core.errors import TraceNote
from traceattr.core.shapes import parse_shape
from traceattr.jobs.round import _round_phases, read_receipt
from traceattr.phases.align import fit, windows
from traceattr.phases.attribute import LAUNCH, TEARDOWN, call_phases, call_spans, cta_phases, per_sm
from traceattr.phases.compare import PhaseComparison, PhaseDelta
from traceattr.phases.compare import round_phases as round_phases_of
from traceattr.phases.floor import FIXED_COST_FACTOR, fixed_cost, floors
from traceattr.phases.layout import StampError, read_index, read_stamps
from traceattr.phases.report import cta_timeline, phase_report
from traceattr.present.names import printable
from traceattr.present.phases import (
    bound_text,
    deltas_markdown,
    interval_us,
    load,
    load_diff,
    load_round,
    median_frame,
    median_title,
    moved_rows,
    render_phases,
    round_markdown,
    signed_us,
    us,
    verdict_lines,
)

ARM = "k[merge=reduce]"
SHAPE = "q1_ctx8k_h16_b1_bf16_p64"
BOUNDS = ["begin", "loaded", "done"]
T0 = 1_796_411_153_442_422_976  # a real %globaltimer value: beyond a double's exact integers
OFFSET = -1_796_411_153_400_000_000  # nsys time = stamp + OFFSET (+ skew)


def synthetic(
    calls: int = 6, ctas: int = 4, skew_ppm: float = 0.0, reduce: bool = True
) -> tuple[np.ndarray, pl.DataFrame]:
    """Stamps and kernels.parquet rows of *calls* calls: split kernel (CTA c: begin 1000+100c, loaded +2000,
    done +5000+300c), a gap of 700 ns, reduce kernel (1 CTA, 800 ns); the nsys kernel ends 400 ns after the
    last CTA's last stamp. Calls are 1 ms apart."""
    width = len(BOUNDS) + 1
    a = np.zeros((calls, ctas + (1 if reduce else 0), width), dtype=np.int64)
    rows = []
    for i in range(calls):
        k0 = T0 + i * 1_000_000  # the split kernel's start on the GPU clock
        for c in range(ctas):
            begin = k0 + 1000 + 100 * c
            a[i, c] = [begin, begin + 2000, begin + 7000 + 300 * c, 10 + c]
        split_end = int(a[i, :ctas, 2].max()) + 400
        message = f"{DOMAIN}:" + CallName(ARM, SHAPE, "A", i).message

        def nsys(t: int, i: int = i) -> int:
            return int(t + OFFSET + skew_ppm * 1e-6 * (t - T0))

        rows.append(("split_kv", nsys(k0), nsys(split_end), message))
        if reduce:
            r0 = split_end + 700
            a[i, ctas] = [r0 + 300, r0 + 600, r0 + 800, 99]
            rows.append(("reduce", nsys(r0), nsys(r0 + 1100), message))
    kernels = pl.DataFrame(rows, schema=["name", "start_ns", "end_ns", "range_name"], orient="row")
    return a, kernels


def write_folder(folder: Path, a: np.ndarray, kernels: pl.DataFrame, ctas: int = 4, reduce: bool = True) -> Path:
    (folder / "stamps").mkdir(parents=True)
    np.save(folder / "stamps" / "000.npy", a)
    parts = [{"kernel": "split_kv", "boundaries": BOUNDS, "rows": ctas}]
    if reduce:
        parts.append({"kernel": "reduce", "boundaries": BOUNDS, "rows": 1})
    entry = {"file": "000.npy", "arm": ARM, "shape": SHAPE, "iters": list(range(a.shape[0])), "layout": 1,
             "width": a.shape[2], "kernels": parts}  # fmt: skip
    (folder / "stamps" / "index.json").write_text(json.dumps([entry]), encoding="utf-8")
    kernels.write_parquet(folder / "kernels.parquet")
    return folder


def test_reader_gives_one_row_per_stamp_with_names_and_sm(tmp_path: Path) -> None:
    a, kernels = synthetic()
    folder = write_folder(tmp_path, a, kernels)
    (sf,) = read_index(folder)
    assert [k.row0 for k in sf.kernels] == [0, 4]
    st = read_stamps(folder)
    assert st.height == 6 * 5 * 3
    row = st.filter((pl.col("iter") == 2) & (pl.col("kernel") == "split_kv") & (pl.col("cta") == 3)).sort("boundary")
    assert row["name"].to_list() == BOUNDS
    assert row["sm"].to_list() == [13, 13, 13]
    assert row["t_ns"].to_list() == a[2, 3, :3].tolist()  # exact int64, no float rounding
    assert not st["clamped"].any()


def test_missing_cta_is_refused_in_one_line(tmp_path: Path) -> None:
    a, kernels = synthetic()
    a[3, 2, :] = 0  # CTA 2 of call 3 never wrote
    folder = write_folder(tmp_path, a, kernels)
    with pytest.raises(StampError) as err:
        read_stamps(folder)
    message = str(err.value)
    assert "\n" not in message and "000.npy" in message and "call iter 3" in message and "CTA 2" in message


def test_array_that_does_not_match_its_index_is_refused(tmp_path: Path) -> None:
    a, kernels = synthetic()
    folder = write_folder(tmp_path, a, kernels)
    np.save(folder / "stamps" / "000.npy", a[:, :, :3])  # a column short of what the index says
    with pytest.raises(StampError, match="index says"):
        read_stamps(folder)


def test_reordered_stamps_are_clamped_and_counted(tmp_path: Path) -> None:
    a, kernels = synthetic()
    a[1, 0, 1] = a[1, 0, 0] - 50  # "loaded" written before "begin": a clock read moved by the compiler
    folder = write_folder(tmp_path, a, kernels)
    report = phase_report(folder)
    assert report is not None and report.clamped == 1
    one = (pl.col("iter") == 1) & (pl.col("kernel") == "split_kv") & (pl.col("cta") == 0)
    loaded = report.ctas.filter(one & (pl.col("phase") == "loaded"))
    assert loaded["duration_ns"].to_list() == [0.0]
    assert (report.ctas["duration_ns"] >= 0).all()


def test_alignment_recovers_offset_and_skew(tmp_path: Path) -> None:
    a, kernels = synthetic(calls=40, skew_ppm=3.0)
    folder = write_folder(tmp_path, a, kernels)
    report = phase_report(folder)
    assert report is not None
    al = report.alignment
    assert al.skew_ppm == pytest.approx(3.0, abs=0.1)
    # nsys time of the first stamp: T0 + 1000 on the GPU clock is nsys (T0 + 1000) + OFFSET
    assert al.offset_ns == pytest.approx(T0 + 1000 + OFFSET, abs=max(al.band_ns, 2.0))
    assert al.worst_ns == 0.0


def test_stamps_of_another_capture_cannot_be_aligned(tmp_path: Path) -> None:
    a, kernels = synthetic()
    a[4] += 500_000  # one call's stamps half a millisecond off: no single offset fits all calls
    folder = write_folder(tmp_path, a, kernels)
    with pytest.raises(StampError, match="cannot share one offset"):
        phase_report(folder)


def test_call_without_nsys_record_is_refused(tmp_path: Path) -> None:
    a, kernels = synthetic()
    folder = write_folder(tmp_path, a, kernels.filter(~pl.col("range_name").str.ends_with("iter=5")))
    with pytest.raises(StampError, match="call iter 5: 0 nsys records of kernel"):
        phase_report(folder)


def test_critical_path_is_the_last_cta_and_adds_up_to_the_call(tmp_path: Path) -> None:
    a, kernels = synthetic(skew_ppm=0.0)
    report = phase_report(write_folder(tmp_path, a, kernels))
    assert report is not None
    (median,) = report.medians
    phases = {p.phase: p.median_ns for p in median.phases}
    # the last split CTA is CTA 3: begins 1300 ns in, loaded +2000, done +5000 + 900, then 400 ns teardown
    assert phases["split_kv:launch"] == pytest.approx(1300, abs=64)
    assert phases["split_kv:loaded"] == pytest.approx(2000, abs=1)
    assert phases["split_kv:done"] == pytest.approx(5900, abs=1)
    assert phases["split_kv:teardown"] == pytest.approx(400, abs=64)
    assert phases["gap→reduce"] == 700
    assert phases["reduce:done"] == pytest.approx(200, abs=1)
    assert [p.phase for p in median.phases][:2] == ["split_kv:launch", "split_kv:loaded"]
    assert median.span_ns == 1300 + 7900 + 400 + 700 + 1100
    assert abs(median.sum_error) < 1e-9


def test_per_cta_phases_start_where_the_previous_ended(tmp_path: Path) -> None:
    a, kernels = synthetic(calls=3)
    folder = write_folder(tmp_path, a, kernels)
    st = read_stamps(folder)
    win = windows(st, kernels)
    ctas = cta_phases(st, win, fit(win))
    one = ctas.filter((pl.col("iter") == 0) & (pl.col("kernel") == "split_kv") & (pl.col("cta") == 1)).sort("order")
    assert one["phase"].to_list() == [LAUNCH, "loaded", "done", TEARDOWN]
    ends = (one["start_ns"] + one["duration_ns"]).to_list()
    assert one["start_ns"].to_list()[1:] == pytest.approx(ends[:-1])
    assert ends[-1] == pytest.approx(win.filter((pl.col("iter") == 0) & (pl.col("kernel") == "split_kv")).select(
        pl.col("end_ns") - pl.col("start_ns")).item())  # fmt: skip
    sms = per_sm(ctas)
    assert sms.filter(pl.col("kernel") == "split_kv")["sm"].to_list() == [10, 11, 12, 13]
    calls = call_phases(ctas, win)
    assert calls.filter(pl.col("iter") == 0)["phase"].to_list()[-1] == "reduce:teardown"


def test_folder_without_stamps_has_no_report(tmp_path: Path) -> None:
    assert phase_report(tmp_path) is None


def test_floor_probes_and_the_fixed_cost_verdict() -> None:
    rows = []
    for rep in range(9):
        name = f"{DOMAIN}:floor arm={ARM} probe=one_tile shape={SHAPE} rep={rep}"
        rows += [
            ("split_kv", 1000 * rep, 1000 * rep + 5000 + rep, name),
            ("reduce", 1000 * rep + 5500, 1000 * rep + 6000, name),
        ]
        rows.append(("empty", 0, 500 + rep, f"{DOMAIN}:floor arm={ARM} probe=empty shape={SHAPE} rep={rep}"))
    found = floors(pl.DataFrame(rows, schema=["name", "start_ns", "end_ns", "range_name"], orient="row"))
    by = {f.probe: f for f in found}
    assert by["one_tile"].median_ns == 5504 and by["one_tile"].reps == 9  # both kernels of a rep, not the gap
    assert by["empty"].median_ns == 504
    assert by["one_tile"].low_ns <= 5504 <= by["one_tile"].high_ns
    near = fixed_cost(ARM, SHAPE, 5504 * FIXED_COST_FACTOR, found)
    far = fixed_cost(ARM, SHAPE, 5504 * FIXED_COST_FACTOR * 1.01, found)
    assert near is not None and near.bound and "fixed-cost bound" in near.describe()
    assert far is not None and not far.bound and "not fixed-cost bound" in far.describe()
    assert fixed_cost("other", SHAPE, 1.0, found) is None
    assert near.probe == "one_tile" and "the one_tile floor" in near.describe()


def test_the_verdict_is_against_the_grid_tile_floor_where_there_is_one() -> None:
    rows = [(k, 10**6 * r, 10**6 * r + ns + r, f"{DOMAIN}:floor arm={ARM} probe={probe} shape={SHAPE} rep={r}")
            for r in range(9) for k, probe, ns in (("split_kv", "one_tile", 5000), ("split_kv", "grid_tile", 9000))]  # fmt: skip
    found = floors(pl.DataFrame(rows, schema=["name", "start_ns", "end_ns", "range_name"], orient="row"))
    verdict = fixed_cost(ARM, SHAPE, 12_000, found)  # 2.4× one tile, 1.33× the grid's
    assert verdict is not None and verdict.probe == "grid_tile" and verdict.bound
    assert "1.33× the grid_tile floor 9.00 µs" in verdict.describe()
    only_one = fixed_cost(ARM, SHAPE, 12_000, tuple(f for f in found if f.probe == "one_tile"))
    assert only_one is not None and only_one.probe == "one_tile" and not only_one.bound


def with_floor(folder: Path, kernels: pl.DataFrame, one_tile_ns: int) -> None:
    rows = [("split_kv", 10**9 + 10**5 * r, 10**9 + 10**5 * r + one_tile_ns, f"{DOMAIN}:floor arm={ARM} probe=one_tile shape={SHAPE} rep={r}") for r in range(9)]  # fmt: skip
    pl.concat([kernels, pl.DataFrame(rows, schema=kernels.columns, orient="row")]).write_parquet(
        folder / "kernels.parquet"
    )
    gpu = {"gpu": {"name": "NVIDIA H200"}, "shapes": {SHAPE: {"kv_bytes": 4_800_000}}}
    (folder / "runner.json").write_text(json.dumps(gpu), encoding="utf-8")


def test_terminal_table_and_fixed_cost_verdict(tmp_path: Path) -> None:
    a, kernels = synthetic()
    folder = write_folder(tmp_path, a, kernels)
    with_floor(folder, kernels, 8000)  # the call spans 11.4 µs: 1.43× the floor
    report = load(folder)
    assert report is not None
    (line,) = verdict_lines(report)
    assert "one_tile floor 8.00 µs" in line and "fixed-cost bound: 11.40 µs = 1.43×" in line
    share = parse_shape(SHAPE).bytes_moved() / 4.8e12 / 11.4e-6  # no trace beside: the H200's datasheet 4.8 TB/s
    assert f"roofline {100 * share:.1f}% (memory bound)" in line and share > 0.01
    assert phase_report(folder) is not None and phase_report(folder).bounds[0].roofline_share is None  # type: ignore[union-attr]
    con = Console(width=200, record=True)
    render_phases(report, con)
    text = con.export_text()
    assert "split_kv:loaded" in text and "gap→reduce" in text and "Σ phases" in text and "span 11.40" in text
    assert f"{ARM} · {SHAPE}" in text  # the label's [options] survive rich's markup


def test_deltas_markdown_marks_what_moved() -> None:
    c = PhaseComparison("base", "cand", (PhaseDelta(SHAPE, "split_kv:merged", 0.0, 5000.0, 4800.0, 5200.0),
                                          PhaseDelta(SHAPE, "split_kv:launch", 800.0, 810.0, -30.0, 40.0)))  # fmt: skip
    merged, launch = deltas_markdown(c, {SHAPE: "q1_ctx8k"}).splitlines()[2:]
    assert merged.endswith("+5.00 [+4.80, +5.20] | yes |")
    assert launch.endswith("+0.01 [-0.03, +0.04] |  |") and launch.startswith("| q1_ctx8k |")
    assert [d.phase for d in c.moved(SHAPE)] == ["split_kv:merged"]


def test_cli_refuses_bad_input_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "absent")]) == 2
    assert main([str(tmp_path)]) == 2
    a, kernels = synthetic()
    a[0, 1, :] = 0
    assert main([str(write_folder(tmp_path / "run", a, kernels))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(e.startswith("traceattr phases: ") for e in err)
    assert "wrote no stamps" in err[2]
    np.testing.assert_array_equal(np.load(tmp_path / "run" / "stamps" / "000.npy"), a)  # input untouched


# ------------------------------------------------------------- one record, every surface (docs/phases.md)
@pytest.fixture(scope="module")
def round_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A round of the reduce kernel against the in-kernel merge, 3 stamped captures."""
    return stamped_round(tmp_path_factory.mktemp("round") / "round")


def test_a_stamped_capture_reads_back_as_it_was_made(stamped_run: Path) -> None:
    report = load(stamped_run)
    assert report is not None and report.clamped == 0
    assert report.alignment.skew_ppm == pytest.approx(SKEW_PPM, abs=1.5) and report.alignment.worst_ns == 0
    by = {(m.arm, m.shape): m for m in report.medians}
    assert [(m.shape, m.arm) for m in report.medians] == sorted((s, a) for a, s in by)  # rows first, arms beside
    merged = {p.phase: p.median_ns for p in by[INKERNEL, ROWS[0].shape].phases}
    assert merged["split_kv:merged"] == pytest.approx(12_000, abs=300)  # the last arriver's merge
    assert "reduce:merged" in {p.phase for p in by[REDUCE, ROWS[0].shape].phases}
    for m in report.medians:
        assert abs(m.sum_error) < 0.01
        spans = call_spans(report.runs.filter((pl.col("arm") == m.arm) & (pl.col("shape") == m.shape)))
        nearest = spans.with_columns((pl.col("span_ns") - m.span_ns).abs().alias("d")).sort("d", "iter")
        assert m.typical_iter == nearest["iter"][0]  # the call drawn CTA by CTA is the median's nearest
    bound = report.bound(by[REDUCE, ROWS[0].shape])
    assert bound is not None and bound.fixed is not None and not bound.fixed.bound
    assert [f.probe for f in bound.floors] == ["empty", "one_tile"] and bound.roofline_share is not None


def test_the_cta_timeline_lies_inside_nsys_kernels(stamped_run: Path) -> None:
    report = load(stamped_run)
    assert report is not None
    m = next(m for m in report.medians if m.arm == REDUCE)
    kernels, phases = cta_timeline(report, m)
    assert kernels["kernel"].to_list() == ["split_kv", "reduce"] and kernels["x0_ns"][0] == 0
    ends = phases.group_by("kernel", "cta").agg(
        pl.col("x0_ns").min().alias("first"), (pl.col("x0_ns") + pl.col("duration_ns")).max().alias("last")
    )
    spans = ends.join(kernels, on="kernel")
    assert (spans["first"] - spans["x0_ns"]).abs().max() < 1e-6  # launch starts at nsys's kernel start …
    assert (spans["last"] - spans["x0_ns"] - spans["duration_ns"]).abs().max() < 1e-6  # … teardown ends at its end
    assert phases.filter(pl.col("kernel") == "split_kv").height == 16 * (len(SPLIT_BOUNDS) + 1)


def test_a_round_says_which_phase_moved(round_folder: Path) -> None:
    receipt = read_receipt(round_folder)
    phases = load_round(receipt, round_folder)
    assert phases is not None and [r.folder.name for r in phases.captures] == ["capture-1", "capture-2", "capture-3"]
    c = phases.comparison
    assert (c.baseline, c.candidate) == ("reduce", "inkernel") and set(c.shapes) == {r.shape for r in ROWS}
    for shape in c.shapes:
        moved = c.moved(shape)
        assert moved[0].phase == "split_kv:merged" and 11_500 < moved[0].delta_ns < 12_500
        assert [abs(d.delta_ns) for d in moved] == sorted((abs(d.delta_ns) for d in moved), reverse=True)
        assert all(d.moved for d in moved) and not any(d.moved for d in c.of(shape) if d not in moved)
        gone = next(d for d in c.of(shape) if d.phase == "reduce:merged")
        assert gone.candidate_calls == 0 and gone.delta_ns == -gone.baseline_ns and gone.moved
        assert gone.baseline_ns == pytest.approx(_reduce_merged_median(round_folder, shape), abs=0.5)


def _reduce_merged_median(round_folder: Path, shape: str) -> float:
    """The reduce kernel's merge on its critical path, read straight from the stamp files of every capture: the
    last reduce CTA to finish, its merged − begin (the skew changes 3 µs by 0.03 ns)."""
    values = []
    for index in sorted(round_folder.glob("capture-*/stamps/index.json")):
        for e in json.loads(index.read_text(encoding="utf-8")):
            if e["arm"] == "reduce" and e["shape"] == shape:
                split, reduce = (k["rows"] for k in e["kernels"])  # the reduce kernel's CTAs follow the split's
                a = np.load(index.parent / e["file"])[:, split : split + reduce, :2]
                last = a[:, :, 1].argmax(axis=1)
                values += [float(a[c, k, 1] - a[c, k, 0]) for c, k in enumerate(last)]
    return float(np.median(values))


def _cells(*cells: str) -> re.Pattern[str]:
    """Adjacent cells of a table row as the terminal draws them (padded, between │)."""
    return re.compile(r"│ +" + r" +│ +".join(map(re.escape, cells)) + r" +│")


@pytest.mark.slow
def test_every_surface_of_a_round_says_the_same(
    round_folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    receipt = read_receipt(round_folder)
    phases = load_round(receipt, round_folder)
    assert phases is not None
    rows = moved_rows(phases, receipt)
    assert [label for label, _ in rows] == ["q1_ctx8k", "q8_ctx32k"]
    md = (round_folder / "receipt.md").read_text(encoding="utf-8")
    page = (round_folder / "report.html").read_text(encoding="utf-8")
    monkeypatch.setenv("COLUMNS", "1000")  # one line per row: the words, not the wrapping, are compared
    _, text, _ = cli(capsys, "report", round_folder, "--format", "text")
    _, compared, _ = cli(capsys, "compare", round_folder)
    for label, words in rows:
        assert words.startswith("split_kv:merged +12.") and words.count(" µs [") >= 3
        assert f"- **{label}**: {words}" in md
        assert f"<li><b>{label}</b>: {html.escape(words)}</li>" in page
        assert f"  {label}: {words}" in text and f"  {label}: {words}" in compared
    assert (round_folder / "phases.md").read_text(encoding="utf-8") == round_markdown(phases, receipt)
    for d in phases.comparison.deltas:  # every phase's change on the page and in the terminal's tables
        assert f"<td>{signed_us(d.delta_ns)}</td><td>{interval_us(d.low_ns, d.high_ns)}</td>" in page
        assert _cells(signed_us(d.delta_ns), interval_us(d.low_ns, d.high_ns)).search(text)
    assert 'id="fig-phases"' in page and 'id="fig-cta"' in page  # the first capture's figures follow


@pytest.mark.slow
def test_compare_and_report_of_a_stamped_run_folder(
    stamped_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    report = load(stamped_run)
    assert report is not None
    monkeypatch.setenv("COLUMNS", "200")
    rc, out, err = cli(capsys, "compare", stamped_run, "--out", tmp_path / "out")
    assert rc == 0, err
    written = pl.read_csv(tmp_path / "out" / "phases.csv")
    assert written.equals(median_frame(report).cast(written.schema))  # type: ignore[arg-type]
    _, text, _ = cli(capsys, "report", stamped_run, "--format", "text")
    for screen in (out, text):
        assert report.alignment.describe() in screen
        for m in report.medians:
            assert median_title(m) in screen
            for p in m.phases:
                assert f"│ {printable(p.phase):<20} │ {us(p.median_ns):>6} │" in screen
        for line in verdict_lines(report):
            assert line.split(":")[0] in screen
    rc, out, err = cli(capsys, "compare", stamped_run, "--format", "json")
    assert rc == 0 and isinstance(json.loads(out), list)  # stdout stays one table; phases go to --out
    # the page too: report reads a run folder's stamps before its attribution, an export's never
    rc, _, err = cli(capsys, "report", stamped_run, "-o", tmp_path / "run.html")
    assert rc == 0, err
    page = (tmp_path / "run.html").read_text()
    assert 'id="fig-phases"' in page and report.alignment.describe() in page


@pytest.mark.slow
def test_diff_compares_each_arm_and_names_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = stamped_folder(tmp_path / "before", (REDUCE,), seed=1).folder
    after = stamped_folder(tmp_path / "after", (INKERNEL,), seed=2).folder
    both = stamped_folder(tmp_path / "both", (REDUCE, INKERNEL), seed=3).folder
    d = load_diff([Path(before)], [Path(after)])
    assert d is not None and [(c.baseline, c.candidate) for c in d.comparisons] == [(REDUCE, INKERNEL)]
    monkeypatch.setenv("COLUMNS", "200")
    rc, out, err = cli(capsys, "diff", before, after, "--out", tmp_path / "out")
    assert rc == 0, err
    (c,) = d.comparisons
    for delta in c.deltas:
        assert _cells(signed_us(delta.delta_ns), interval_us(delta.low_ns, delta.high_ns)).search(out)
    assert out.index("Kernels: before → after") < out.index("Phases inside the kernel")
    written = pl.read_csv(tmp_path / "out" / "phases.csv")
    assert written.height == len(c.deltas) and written["moved"].to_list() == [x.moved for x in c.deltas]
    same = load_diff([Path(both)], [Path(before)])
    assert same is not None and [(c.baseline, c.candidate) for c in same.comparisons] == [(REDUCE, REDUCE)]
    assert same.unmatched == (f"before: {INKERNEL}",)
    assert load_diff([Path(before)], [tmp_path]) is None  # a side without stamps: no phases


def test_a_retried_row_is_compared_over_its_latest_attempt(round_folder: Path) -> None:
    receipt = read_receipt(round_folder)
    both = load_round(receipt, round_folder)
    assert both is not None
    q1, q8 = (r.shape for r in ROWS)
    latest = round_phases_of(round_folder, "reduce", "inkernel", receipt.captures, latest={q1: 1, q8: 3})
    assert latest is not None
    last = both.captures[-1].calls.filter((pl.col("shape") == q1) & (pl.col("phase") == "reduce:merged"))
    only = next(d for d in latest.comparison.of(q1) if d.phase == "reduce:merged")
    assert only.baseline_ns == float(np.median(last["duration_ns"].to_numpy())) and only.baseline_calls == last.height
    assert latest.comparison.of(q8) == both.comparison.of(q8)  # every capture, as load_round takes them
    assert next(d for d in both.comparison.of(q1) if d.phase == "reduce:merged").baseline_calls == 3 * last.height


def test_stamps_that_cannot_be_trusted_cost_the_phases_not_the_receipt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = stamped_round(tmp_path / "round", captures=2, report=False)
    npy = broken / "capture-2" / "stamps" / "000.npy"
    a = np.load(npy)
    a[0, 3, :] = 0  # a CTA that wrote nothing
    np.save(npy, a)
    with pytest.warns(TraceNote, match="phases are left out: .*000.npy.*wrote no stamps"):
        assert _round_phases(read_receipt(broken), broken) is None
    rc, _, err = cli(capsys, "report", broken, "--format", "text")
    one_line(rc, err, "000.npy", "wrote no stamps")


def test_the_module_alias_prints_the_rounds_phase_receipt(
    round_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(round_folder)]) == 0
    assert capsys.readouterr().out == (round_folder / "phases.md").read_text(encoding="utf-8")


def test_the_phase_verdicts_roofline_is_compares(stamped_run: Path) -> None:
    """One roofline: the phase verdict's bound and share are compare's ``bound`` and ``roofline`` columns, at the
    trace's GPU figure (the synthetic trace says 8 TB/s where the H200's datasheet says 4.8) and with the compute
    bound where it applies, not a memory-only share at a bandwidth of their own."""
    from traceattr import open as open_trace

    report = load(stamped_run)
    assert report is not None
    summary = open_trace(stamped_run).analyse().summary
    assert set(summary["bound"].to_list()) == {"memory", "compute"}  # both kinds of row are checked
    for m in report.medians:
        bound = report.bound(m)
        assert bound is not None and bound.roofline_share is not None
        row = summary.filter((pl.col("backend") == m.arm) & (pl.col("shape") == m.shape))
        assert bound.bound == row["bound"][0]
        assert bound.roofline_share == pytest.approx(row["roofline"][0], rel=0.01)  # the two medians of the span
        if bound.bound == "memory":
            moved = parse_shape(m.shape).bytes_moved() / 8e12 / (m.span_ns * 1e-9)
            assert bound.roofline_share == pytest.approx(moved)
        assert f"roofline {100 * bound.roofline_share:.1f}% ({bound.bound} bound)" in bound_text(bound)
    given = load(stamped_run, 2e12)  # --bandwidth: both take the given figure
    assert given is not None
    memory = next(b for b in report.bounds if b.bound == "memory")
    again = next(b for b in given.bounds if (b.arm, b.shape) == (memory.arm, memory.shape))
    assert again.roofline_share == pytest.approx(4 * (memory.roofline_share or 0))


def test_the_shipped_h100_round_reads_its_phases(capsys: pytest.CaptureFixture[str]) -> None:
    # real stamps from the H100 (examples/rounds/split_mla_h100): aligned again here, the merge moves where
    # the receipt says, and each median call's phases add up to its nsys span within the 2%
    folder = Path(__file__).resolve().parents[1] / "examples" / "rounds" / "split_mla_h100" / "q1_ctx8k_round"
    rc, out, err = cli(capsys, "compare", folder)
    assert rc == 0, err
    assert re.search(r"q1_ctx8k: split_kv:merged \+15\d\.\d\d µs", out)
    assert out.count("stamps aligned with nsys over 9 kernel runs") == 2
    assert main([str(folder)]) == 0
    out = capsys.readouterr().out
    errors = [float(e) for e in re.findall(r"\| ([+-]\d+\.\d\d)% \|$", out, re.M)]
    assert len(errors) == 4 and max(map(abs, errors)) < 2.0, out[-2000:]
    # the short row's reduce arm against its own grid with one tile a split (peel=0 kernel, H100)
    assert re.search(r"merge=reduce\] q1_ctx8k\S*: empty floor .* grid_tile floor 10\.\d\d µs .* fixed-cost bound: "
                     r"16\.\d\d µs = 1\.4\d× the grid_tile floor", out), out[-2000:]  # fmt: skip
