"""Many traces at once: inputs, per-rank numbers, parallel and Dask runs, failures alone, the CLI."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import traceattr
from tests.helpers import IN_CI, NCCL, rank_trace, run
from traceattr.core.errors import TraceattrError
from traceattr.jobs import many


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """rank0 (attention 10 µs) and rank1 (12 µs, one 40 µs outlier step) beside a damaged report."""
    folder = tmp_path_factory.mktemp("ranks")
    rank_trace(folder / "rank0.sqlite", [10_000, 10_000, 10_000])
    rank_trace(folder / "rank1.sqlite", [12_000, 40_000, 12_000])
    (folder / "rank2.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x00" * 200)  # a header, then nothing
    return folder


def test_inputs_from_folders_patterns_and_run_folders(tmp_path: Path) -> None:
    a, b = rank_trace(tmp_path / "a.sqlite", [1_000]), rank_trace(tmp_path / "b.sqlite", [1_000])
    (tmp_path / "b.nsys-rep").write_bytes(b"")  # has its export beside it: the export is used
    (tmp_path / "c.nsys-rep").write_bytes(b"")  # no export: the report itself
    run_dir = tmp_path / "20261130_run"
    run_dir.mkdir()
    shutil.copy(a, run_dir / "trace.sqlite")
    got = many.expand_inputs([tmp_path])
    assert got == [run_dir, a, b, tmp_path / "c.nsys-rep"]
    assert many.expand_inputs([str(tmp_path / "*.sqlite"), a]) == [a, b]  # a named twice runs once
    assert many.expand_inputs([run_dir]) == [run_dir]
    assert many.trace_names(got) == ["20261130_run", "a", "b", "c"]
    other = tmp_path / "x" / "a.sqlite"
    other.parent.mkdir()
    shutil.copy(a, other)
    assert many.trace_names([a, other]) == ["a", "x/a"]  # equal stems: the path below the common folder
    with pytest.raises(TraceattrError, match="no file matches"):
        many.expand_inputs([str(tmp_path / "*.nope")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceattrError, match="is a directory without"):
        many.expand_inputs([tmp_path / "empty"])


def test_per_rank_numbers_and_the_slowest_rank(ranks: Path) -> None:
    results = many.run_traces(many.expand_inputs([ranks]), many.Settings(), workers=1)
    combined = many.combine(results)
    assert [r.ok for r in results] == [True, True, False]
    assert combined.failures == (results[2].error,) and "rank2.sqlite" in results[2].error
    assert "\n" not in results[2].error
    across = many.across_traces(combined.ranges, "name").filter(pl.col("name") == "dcp:attention").row(0, named=True)
    # per rank the median attention range (projected: first op start → last op end = the kernel)
    assert across["traces"] == 2 and across["rows"] == 6
    assert across["rank_min_gpu_span_ns"] == 10_000 and across["rank_max_gpu_span_ns"] == 12_000
    assert across["rank_median_gpu_span_ns"] == 11_000 and across["spread_gpu_span_ns"] == 2_000
    assert across["spread_rel"] == pytest.approx(0.2)
    assert across["slowest_trace"] == "rank1" and across["fastest_trace"] == "rank0"
    assert across["gpu_span_total_ns"] == 30_000 + 64_000
    reports = combined.traces.filter(pl.col("ok"))
    assert reports[many.TRACE_COLUMN].to_list() == ["rank0", "rank1"]
    assert reports["attention_sum_ns"].to_list() == [30_000, 64_000]
    assert reports["reduce_sum_ns"].to_list() == [9_000, 9_000]  # the merge kernels
    assert reports["gpu_ops"].to_list() == [9, 9] and reports["unattributed_ops"].to_list() == [0, 0]
    assert reports["gpu"].to_list() == ["NVIDIA H200"] * 2


def _frames(results: list[many.TraceResult]) -> tuple[pl.DataFrame, pl.DataFrame]:
    c = many.combine(results)
    return c.ranges, c.traces.drop("seconds", "worker_pid", "worker_peak_rss_mb")


@pytest.mark.slow
def test_processes_give_the_serial_answer_and_each_report_equals_its_own_attribution(
    ranks: Path, exports: dict[str, Path], tmp_path: Path
) -> None:
    paths = [*many.expand_inputs([ranks]), exports["h200_torch_tiny"]]
    serial = many.run_traces(paths, many.Settings(mode="innermost"), workers=1)
    with many.parts_folder(tmp_path / "out") as parts:
        parallel = many.run_traces(paths, many.Settings(mode="innermost"), workers=2, parts=parts)
        assert {r.summary["worker_pid"] for r in parallel} != {os.getpid()}
        kernels = many.kernels_lazy(many.combine(parallel)).collect()  # type: ignore[union-attr]
    for a, b in zip(_frames(serial), _frames(parallel), strict=True):
        assert_frame_equal(a, b)
    name = serial[-1].trace
    tiny = many.combine(serial).ranges.filter(pl.col(many.TRACE_COLUMN) == name).drop(many.TRACE_COLUMN)
    alone = traceattr.open(exports["h200_torch_tiny"]).attribute(mode="innermost")
    assert_frame_equal(tiny, alone.ranges)
    assert_frame_equal(
        kernels.filter(pl.col(many.TRACE_COLUMN) == name).drop(many.TRACE_COLUMN), alone.ops.sort("op_id")
    )


@pytest.mark.slow
def test_dask_local_cluster(ranks: Path) -> None:
    if not IN_CI:
        pytest.importorskip("distributed", reason="the `multi` extra (Dask) is not installed")
    paths = many.expand_inputs([ranks])
    serial = many.run_traces(paths, many.Settings(), workers=1)
    seen = []
    on_dask = many.run_traces(paths, many.Settings(), workers=2, dask="local", on_done=seen.append)
    assert len(seen) == 3 and not on_dask[2].ok and on_dask[2].error == serial[2].error
    for a, b in zip(_frames(serial), _frames(on_dask), strict=True):
        assert_frame_equal(a, b)


@pytest.mark.slow
def test_cli_many_reports_write_what_was_read_and_exit_2(ranks: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = run("attribute", str(ranks), "--out", str(out), "--format", "parquet", "--workers", "2")
    assert res.returncode == 2
    errors = [line for line in res.stderr.splitlines() if line.startswith("traceattr: error:")]
    assert len(errors) == 1 and "rank2.sqlite" in errors[0], res.stderr
    assert "Traceback" not in res.stderr
    assert all(line.strip() for line in res.stderr.splitlines()), res.stderr  # no bar's empty line in a log
    assert sorted(p.name for p in out.iterdir()) == [
        "across_traces.parquet",
        "attribution.json",
        "kernels.parquet",
        "ranges.parquet",
        "traces.parquet",
    ]  # fmt: skip  (the workers' scratch parts are gone)
    ranges = pl.read_parquet(out / "ranges.parquet")
    assert ranges.columns[0] == many.TRACE_COLUMN and set(ranges[many.TRACE_COLUMN]) == {"rank0", "rank1"}
    kernels = pl.read_parquet(out / "kernels.parquet")
    assert kernels.group_by(many.TRACE_COLUMN).len().sort(many.TRACE_COLUMN)["len"].to_list() == [9, 9]
    assert set(kernels.filter(pl.col("name") == NCCL)["family"]) == {"nccl"}  # a rank's collective is named
    assert pl.read_parquet(out / "traces.parquet")["ok"].to_list() == [True, True, False]
    table = run("attribute", str(ranks / "rank*.sqlite"), "-j", "1")  # a quoted pattern; terminal tables
    assert table.returncode == 2 and "Across traces" in table.stdout and "rank1" in table.stdout


def test_cli_all_reports_bad_is_one_error_and_no_output(tmp_path: Path) -> None:
    (tmp_path / "a.sqlite").write_bytes(b"")
    (tmp_path / "b.sqlite").write_bytes(b"junk")
    out = tmp_path / "out"
    res = run("attribute", str(tmp_path / "a.sqlite"), str(tmp_path / "b.sqlite"), "-o", str(out), "-j", "1")
    assert res.returncode == 2 and "none of the 2 traces could be read" in res.stderr
    assert not out.exists()


@pytest.mark.slow
def test_cli_compare_pools_calls_one_round_per_report(exports: dict[str, Path], tmp_path: Path) -> None:
    sweep = exports["h200_traceattr_sweep"]
    for rank in ("rank0", "rank1"):
        shutil.copy(sweep, tmp_path / f"{rank}.sqlite")
    single = run("compare", str(sweep), "-o", str(tmp_path / "one"))
    pooled = run("compare", str(tmp_path / "rank0.sqlite"), str(tmp_path / "rank1.sqlite"), "-o", str(tmp_path / "two"))
    assert single.returncode == 0 and pooled.returncode == 0, pooled.stderr
    one = pl.read_csv(tmp_path / "one" / "summary.csv")
    two = pl.read_csv(tmp_path / "two" / "summary.csv")
    # the same calls twice: the same medians, twice the calls and twice the rounds
    assert_frame_equal(one.select("shape", "backend", "median_us"), two.select("shape", "backend", "median_us"))
    assert (two["calls"] == 2 * one["calls"]).all() and (two["iterations"] == 2 * one["iterations"]).all()
    calls = pl.read_csv(tmp_path / "two" / "calls.csv")
    assert (
        calls.columns[0] == many.TRACE_COLUMN and calls.height == 2 * pl.read_csv(tmp_path / "one" / "calls.csv").height
    )
    across = pl.read_csv(tmp_path / "two" / "across_traces.csv")
    assert (across["traces"] == 2).all() and (across["spread_gpu_span_ns"] == 0).all()
