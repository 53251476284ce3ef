"""traceattr diff: before/after totals, kernels, roles and range names; nsys-ai's published pair reproduced."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import traceattr
from tests.helpers import run
from tests.synth.builder import TraceBuilder
from traceattr.analysis.diff import TOTAL, diff
from traceattr.cli import main

PAIR = ("nsysai_mfu_2gpu_before", "nsysai_mfu_2gpu_after")


def _row(d: pl.DataFrame, level: str, name: str) -> dict:
    rows = d.filter((pl.col("level") == level) & (pl.col("name") == name)).to_dicts()
    assert len(rows) == 1, (level, name, rows)
    return rows[0]


@pytest.fixture(scope="module")
def nsysai(exports: dict[str, Path]) -> pl.DataFrame:
    before, after = (traceattr.open(exports[name]).attribute() for name in PAIR)
    return diff(before, after)


@pytest.mark.slow
def test_reproduces_nsys_ai_published_diff(nsysai: pl.DataFrame) -> None:
    # nsys-ai docs/user/reading-a-diff.md: total 535.20 → 488.84 ms; flash_fwd_kernel 68 → 60 (−31.56 ms);
    # ncclDevKernel_SendRecv 66 → 62 (+8.34 ms). "total" is sum(end − start) over every kernel.
    total = _row(nsysai, "total", TOTAL)
    assert (round(total["before_ms"], 2), round(total["after_ms"], 2)) == (535.20, 488.84)
    assert (total["before_n"], total["after_n"]) == (4010, 3587)
    flash = _row(nsysai, "kernel", "flash_fwd_kernel")
    assert (flash["before_n"], flash["after_n"], round(flash["delta_ms"], 2)) == (68, 60, -31.56)
    nccl = _row(nsysai, "kernel", "ncclDevKernel_SendRecv")
    assert (nccl["before_n"], nccl["after_n"], round(nccl["delta_ms"], 2)) == (66, 62, 8.34)
    kernels = nsysai.filter(pl.col("level") == "kernel")
    assert kernels["name"].head(2).to_list() == ["flash_fwd_kernel", "ncclDevKernel_SendRecv"]  # by impact
    assert kernels["delta_ms"].sum() == pytest.approx(total["delta_ms"])
    roles = nsysai.filter(pl.col("level") == "role")
    assert roles["delta_ms"].sum() == pytest.approx(_row(nsysai, "total", "all GPU ops")["delta_ms"])
    assert nsysai.filter(pl.col("level") == "total")["name"].to_list()[0] == TOTAL


def test_range_names_drop_instance_counters(nsysai: pl.DataFrame) -> None:
    ranges = nsysai.filter(pl.col("level") == "range")
    assert not ranges["name"].str.contains(r"op_id = \d").any()
    fa = _row(nsysai, "range", "FlashAttnFunc")
    assert (fa["before_n"], fa["after_n"]) == (67, 60)


def test_names_on_one_side_only(tmp_path: Path) -> None:
    def trace(name: str, kernels: list[tuple[str, int]]) -> Path:
        b = TraceBuilder()
        t = 1_000
        for i, (k, dur) in enumerate(kernels):
            b.push_range(tid=1, start=t, end=t + 500, message=f"step iter={i}")
            b.launch(tid=1, start=t + 10, end=t + 20, kernel=k, gpu_start=t + 100, gpu_end=t + 100 + dur)
            t += dur + 1_000
        return b.write(tmp_path / f"{name}.sqlite")

    before = trace("before", [("old_kernel", 4_000), ("shared", 1_000)])
    after = trace("after", [("shared", 3_000), ("new_kernel", 500), ("new_kernel", 500)])
    d = diff(traceattr.open(before).attribute(), traceattr.open(after).attribute())
    kernels = {r["name"]: r for r in d.filter(pl.col("level") == "kernel").to_dicts()}
    assert kernels["old_kernel"]["after_n"] == 0 and kernels["old_kernel"]["delta_ms"] == pytest.approx(-0.004)
    assert kernels["new_kernel"]["before_n"] == 0 and kernels["new_kernel"]["delta_pct"] is None
    assert kernels["shared"]["delta_pct"] == pytest.approx(200.0)  # percent, as on the terminal
    assert list(kernels) == ["old_kernel", "shared", "new_kernel"]  # |Δ| 4 µs, 2 µs, 1 µs
    step = _row(d, "range", "step")  # "iter=N" counters dropped: the three ranges are one name
    assert (step["before_n"], step["after_n"]) == (2, 3)


@pytest.mark.slow
def test_cli_writes_csv_and_json(exports: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["diff", str(exports[PAIR[0]]), str(exports[PAIR[1]]), "--top", "3", "--out", str(tmp_path)])
    assert exit_info.value.code in (0, None)
    out = capsys.readouterr().out
    assert "535.20 → 488.84" in out and "flash_fwd_kernel" in out and "-31.56" in out
    flash = next(line for line in out.splitlines() if "flash_fwd_kernel" in line)
    assert "68 → 60" in flash and "4,004.7 → 4,012.6" in flash and "+0.2%" in flash and "-11.6%" in flash
    csv = pl.read_csv(tmp_path / "diff.csv")
    assert _row(csv, "kernel", "ncclDevKernel_SendRecv")["delta_n"] == -4
    assert any(r["name"] == TOTAL for r in json.loads((tmp_path / "diff.json").read_text()))


def test_cli_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "x.sqlite"
    bad.write_text("not a database")
    with pytest.raises(SystemExit) as exit_info:
        main(["diff", str(bad), str(bad)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and str(bad) in err and len(err.strip().splitlines()) == 1


def test_fewer_calls_are_not_slower_calls(nsysai: pl.DataFrame) -> None:
    # nsys-ai's pair: flash_fwd_kernel lost 31.56 ms because it ran 8 times less; per call it is 0.2% slower
    flash = _row(nsysai, "kernel", "flash_fwd_kernel")
    assert (flash["before_n"], flash["after_n"]) == (68, 60)
    assert (round(flash["before_per_call_us"] / 1e3, 2), round(flash["after_per_call_us"] / 1e3, 2)) == (4.00, 4.01)
    assert flash["per_call_pct"] == pytest.approx(0.198, abs=1e-3)  # percent
    assert flash["delta_pct"] == pytest.approx(-11.59, abs=0.01)  # percent, not a fraction
    assert round(flash["count_ms"], 2) == -32.04 and round(flash["per_call_ms"], 2) == 0.48
    for r in nsysai.filter(pl.col("per_call_ms").is_not_null()).iter_rows(named=True):
        assert r["count_ms"] + r["per_call_ms"] == pytest.approx(r["delta_ms"], abs=1e-9)
    assert flash["before_median_us"] < flash["before_per_call_us"]  # the median instance is there too
    assert nsysai["per_call_low_pct"].is_null().all()  # one capture a side: no interval


@pytest.mark.slow
def test_several_captures_give_an_interval(tmp_path: Path) -> None:
    def trace(name: str, durations: list[int], arm: str) -> Path:
        b = TraceBuilder()
        t = 1_000
        for i, dur in enumerate(durations):
            b.push_range(tid=1, start=t, end=t + dur + 500, message=f"backend=fa3 shape=q1_ctx8k arm={arm} iter={i}")
            b.launch(tid=1, start=t + 10, end=t + 20, kernel="attn", gpu_start=t + 100, gpu_end=t + 100 + dur)
            t += dur + 1_000
        return b.write(tmp_path / f"{name}.sqlite")

    before = [trace(f"b{k}", [10_000 + 10 * k] * 5, "A") for k in range(3)]
    after = [trace(f"a{k}", [12_000 + 10 * k] * 4, "B") for k in range(3)]
    d = diff([traceattr.open(p).attribute() for p in before], [traceattr.open(p).attribute() for p in after])
    attn = _row(d, "kernel", "attn")
    assert (attn["before_n"], attn["after_n"]) == (5, 4)
    assert attn["per_call_pct"] == pytest.approx(20.0, abs=0.1)
    assert attn["per_call_verdict"] == "slower" and 0 < attn["per_call_low_pct"] <= 20.0 <= attn["per_call_high_pct"]
    # arm=A and arm=B are one backend's ranges: one row, not -100% plus a new one
    call = _row(d, "range", "backend=fa3 shape=q1_ctx8k")
    assert (call["before_n"], call["after_n"]) == (5, 4)
    assert not d["name"].str.contains("arm=").any()
    # a CI gate on it: slower per call after, so --fail-on slower exits 3 after printing the diff
    args = ["diff", *map(str, before), "vs", *map(str, after)]
    gate = run(*args, "--fail-on", "slower")
    assert gate.returncode == 3 and "fail: --fail-on slower: slower per call after: " in gate.stderr
    assert "kernel attn (+20.0%)" in gate.stderr
    assert "attn" in gate.stdout  # the answer first
    assert run(*args).returncode == 0
    one = run("diff", str(before[0]), str(after[0]), "--fail-on", "slower")
    assert one.returncode == 2 and "two or more captures a side" in one.stderr and one.stderr.count("\n") == 1
    bad = run(*args, "--fail-on", "faster")
    assert bad.returncode == 2 and "not a diff condition" in bad.stderr


@pytest.mark.slow
def test_cli_sides(exports: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = str(exports[PAIR[0]]), str(exports[PAIR[1]])
    with pytest.raises(SystemExit) as exit_info:
        main(["diff", a, b, "vs", b, a, "--top", "2", "--out", str(tmp_path)])
    assert exit_info.value.code in (0, None)
    out = capsys.readouterr().out
    assert "interval over captures" in out and "[" in out
    csv = pl.read_csv(tmp_path / "diff.csv")
    flash = _row(csv, "kernel", "flash_fwd_kernel")
    assert (
        flash["per_call_verdict"] in ("same", "ambiguous")
        and flash["per_call_low_pct"] < 0 < flash["per_call_high_pct"]
    )
    for argv in (["diff", a, b, a], ["diff", a, "vs"], ["diff", a, "vs", b, "vs", a]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and len(err.strip().splitlines()) == 1, (argv, err)
