"""traceattr.phases: the stamp reader, alignment with nsys (offset, skew, reordered stamps, missing CTAs), phase math;
and its surfaces: the terminal table, the verdict lines, the round's markdown, bad input (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from rich.console import Console

from traceattr.cli.phases import main
from traceattr.core.callnames import DOMAIN, CallName
from traceattr.phases.align import fit, windows
from traceattr.phases.attribute import LAUNCH, TEARDOWN, call_phases, cta_phases, per_sm
from traceattr.phases.floor import FIXED_COST_FACTOR, fixed_cost, floors
from traceattr.phases.layout import StampError, read_index, read_stamps
from traceattr.phases.report import PhaseDelta, phase_report, round_captures
from traceattr.present.phases import deltas_markdown, render_phases, verdict_lines

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
    report = phase_report(folder)
    assert report is not None
    (line,) = verdict_lines(report)
    assert "one_tile floor 8.00 µs" in line and "fixed-cost bound: 11.40 µs = 1.43×" in line
    assert "HBM roofline share 8.8%" in line  # 4.8 MB at 4.8 TB/s = 1 µs of 11.4
    con = Console(width=200, record=True)
    render_phases(report, con)
    text = con.export_text()
    assert "split_kv:loaded" in text and "gap→reduce" in text and "Σ phases / nsys span" in text
    assert f"{ARM} · {SHAPE}" in text  # the label's [options] survive rich's markup


def test_deltas_markdown_marks_what_moved() -> None:
    text = deltas_markdown(
        (PhaseDelta(SHAPE, "split_kv:merged", 0.0, 5000.0, 4800.0, 5200.0),
         PhaseDelta(SHAPE, "split_kv:launch", 800.0, 810.0, -30.0, 40.0)), "base", "cand")  # fmt: skip
    merged, launch = text.splitlines()[2:]
    assert merged.endswith("+5.00 [+4.80, +5.20] | yes |")
    assert launch.endswith("+0.01 [-0.03, +0.04] |  |") and "q1_ctx8k" in launch


def test_round_captures_are_the_capture_folders_in_number_order(tmp_path: Path) -> None:
    (tmp_path / "receipt.json").write_text(json.dumps({"baseline": "a", "candidate": "b"}), encoding="utf-8")
    for name in ("capture-10", "capture-2", "capture-1", "round-3", "capture-x", "sensitivity"):
        (tmp_path / name).mkdir()
    baseline, candidate, captures = round_captures(tmp_path)
    assert (baseline, candidate) == ("a", "b")
    assert [p.name for p in captures] == ["capture-1", "capture-2", "round-3", "capture-10"]


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
