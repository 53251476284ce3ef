"""The phase tables: compare's terminal table, the verdict lines, the round's markdown, bad input (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from rich.console import Console

from tests.test_phases import ARM, SHAPE, synthetic, write_folder
from traceattr.core.callnames import DOMAIN
from traceattr.phases.__main__ import main
from traceattr.phases.report import PhaseDelta, phase_report
from traceattr.present.phases import deltas_markdown, render_phases, verdict_lines


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


def test_deltas_markdown_marks_what_moved() -> None:
    text = deltas_markdown(
        (PhaseDelta(SHAPE, "split_kv:merged", 0.0, 5000.0, 4800.0, 5200.0),
         PhaseDelta(SHAPE, "split_kv:launch", 800.0, 810.0, -30.0, 40.0)), "base", "cand")  # fmt: skip
    merged, launch = text.splitlines()[2:]
    assert merged.endswith("+5.00 [+4.80, +5.20] | yes |")
    assert launch.endswith("+0.01 [-0.03, +0.04] |  |") and "q1_ctx8k" in launch


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
