"""profile without a GPU: the plan, its errors, the runner's protocol, and the analysis of a
real `traceattr profile` run (H200, fa3 / fa2 / FlashMLA / fa3-per-token, five contexts)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.helpers import DATA
from traceattr.analysis.calls import calls
from traceattr.analysis.decision import crossovers
from traceattr.analysis.pipeline import with_events
from traceattr.analysis.roofline import device_compute_peak, peak_bandwidth
from traceattr.analysis.summary import summarize
from traceattr.attribution.engine import attribute
from traceattr.core.shapes import parse_shape
from traceattr.jobs.capture import profile_command
from traceattr.jobs.profile import make_plan
from traceattr.runner.plan import RunPlan, arm_letters, iteration_order
from traceattr.trace.loader import load_trace

SWEEP = "h200_traceattr_sweep"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "traceattr", *args], capture_output=True, text=True, check=False,
                          env={**os.environ, "COLUMNS": "200", **(env or {})})  # fmt: skip


@pytest.mark.slow
def test_dry_run_prints_the_plan_anywhere(tmp_path: Path) -> None:
    out = cli(
        "profile", "--shape", "q8_ctx900k", "--shape", "q1_ctx131k_h128", "--dry-run", "--out-root", str(tmp_path)
    )
    assert out.returncode == 0, out.stderr
    for needle in ("q8_ctx900k_h16_b1_bf16_p64", "14,063", "1.04 GB", "fa3-per-token", "cute-dsl", "--capture-range=cudaProfilerApi",
                   "--cuda-graph-trace=node", "--sample=none", "traceattr.runner"):  # fmt: skip
        assert needle in out.stdout, needle
    assert not any(tmp_path.iterdir())  # a dry run creates nothing


@pytest.mark.slow
def test_without_gpu_or_nsys_one_line_error(tmp_path: Path) -> None:
    out = cli("profile", "--shape", "q8_ctx900k", "--out-root", str(tmp_path), env={"TRACEATTR_NSYS": "/nonexistent"})
    assert out.returncode == 2
    line = out.stderr.strip()
    assert len(line.splitlines()) == 1 and "cannot profile" in line and "traceattr attribute" in line
    out = cli("profile", "--shape", "q8_ctx9x", "--dry-run")
    assert out.returncode == 2 and "part 'ctx9x'" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    out = cli("profile", "--shape", "q8_ctx9k", "-b", "xformers", "--dry-run")
    assert out.returncode == 2 and "unknown backend 'xformers'" in out.stderr


def test_plan_roundtrip_and_round_order(tmp_path: Path) -> None:
    plan = make_plan([parse_shape("q8_ctx900k")], ["fa3", "flashmla"], iters=4, out_root=tmp_path)
    path = plan.run.write(tmp_path / "plan.json")
    again = RunPlan.read(path)
    assert again == plan.run and again.shapes == ("q8_ctx900k_h16_b1_bf16_p64",)
    arms = ("fa3", "fa2", "flashmla")
    assert [iteration_order(arms, r) for r in range(3)] == [arms, arms[::-1], arms]
    assert arm_letters(arms) == {"fa3": "A", "fa2": "B", "flashmla": "C"}
    assert plan.run.flush_bytes >= 128 << 20


def test_capture_command_is_an_argument_list(tmp_path: Path) -> None:
    argv = profile_command(Path("/x/nsys"), tmp_path / "trace", ["python", "-m", "traceattr.runner", "p.json", "d"])
    assert argv[:2] == ["/x/nsys", "profile"]
    assert {"--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none", "--cuda-graph-trace=node"} <= set(argv)
    assert argv[-5:] == ["python", "-m", "traceattr.runner", "p.json", "d"]


@pytest.fixture(scope="module")
def sweep(exports: dict[str, Path]):
    att = attribute(load_trace(exports[SWEEP]))
    table = calls(att)
    bandwidth, _ = peak_bandwidth(att.trace.devices)
    return att, table, summarize(table, bandwidth, compute_peak=device_compute_peak(att.trace.devices))


def test_calls_of_a_real_profile_run(sweep) -> None:
    att, table, _ = sweep
    assert table.height == 5 * 4 * 10
    assert set(table["backend"].unique()) == {"fa3", "fa2", "flashmla", "fa3-per-token"}
    assert table.group_by("shape", "backend").len()["len"].unique().to_list() == [10]
    # the flush ran outside every call range, in its own range, with role flush
    assert att.ops.filter(pl.col("role") == "flush").height == 200
    assert table["flush_sum_ns"].sum() == 0 and table["flush_exposed_ns"].sum() == 0


def test_reduce_kernel_vs_in_kernel_merge(sweep) -> None:
    _, table, summary = sweep
    flashmla = summary.filter(pl.col("backend") == "flashmla")
    fa3 = summary.filter(pl.col("backend") == "fa3")
    assert (flashmla["reduce_exposed_us"] > 0).all() and (flashmla["kernels"] == 2).all()
    assert (fa3["reduce_exposed_us"] == 0).all() and (fa3["kernels"] == 1).all()
    assert (fa3["attention_exposed_share"] == 1).all()  # one kernel: the whole span
    one = table.filter(pl.col("backend") == "flashmla").row(0, named=True)
    assert one["attention_sum_ns"] + one["reduce_sum_ns"] == one["kernel_sum_ns"]


def test_winners_and_the_crossover(sweep) -> None:
    _, table, summary = sweep
    winners = dict(summary.filter(pl.col("winner")).select("shape", "backend").iter_rows())
    assert winners["q8_ctx8k_h16_b1_bf16_p64"] == "fa3" and winners["q8_ctx900k_h16_b1_bf16_p64"] == "flashmla"
    per_token = summary.filter(pl.col("backend") == "fa3-per-token").sort("ratio_to_best")
    assert per_token["ratio_to_best"].max() > 5  # ~ctx × q: unfolded verify tokens re-read the KV
    cross = crossovers(summary, table)
    assert cross.height == 1  # the one change of winner, and no other pair's crossing
    row = cross.row(0, named=True)
    assert (row["faster_below"], row["faster_above"], row["decided"]) == ("fa3", "flashmla", True)
    assert row["ratio_at_low_lo"] > 1 > row["ratio_at_high_hi"]  # really faster on both sides
    assert row["ctx_low"] == 131_000 and row["ctx_high"] == 512_000 and 131_000 < row["crossover_ctx"] < 512_000
    q900 = summary.filter(pl.col("shape") == "q8_ctx900k_h16_b1_bf16_p64", pl.col("backend") == "fa3")
    # 251 GFLOP take longer at 989 TFLOP/s than 1.04 GB at 4.8 TB/s: compute bound, ~59% of it
    assert q900["bound"].item() == "compute" and 0.55 < q900["roofline"].item() < 0.65


def test_cuda_events_cross_check(sweep) -> None:
    _, table, summary = sweep
    runner = json.loads((DATA / SWEEP / "runner.json").read_text())
    merged = with_events(summary, table, runner["events"])
    big = merged.filter(pl.col("shape") == "q8_ctx900k_h16_b1_bf16_p64")
    # GPU-bound calls: events agree with the nsys span within a few percent (fa3's cooperative
    # launch adds tens of µs between its start event and its kernel)
    assert (big["event_vs_span"] > -0.01).all() and (
        big.filter(pl.col("backend") != "fa3")["event_vs_span"] < 0.05
    ).all()


def test_shapes_command() -> None:
    out = cli("shapes")
    assert out.returncode == 0
    assert "mtp_q4_ctx342305_h96_b8_bf16_p64" in out.stdout and "kimi-tp8" in out.stdout
    assert "``" not in out.stdout and ":meth:" not in out.stdout  # plain text, not reST
    assert "So q8_ctx900k is 8 verify tokens" in out.stdout and "Grammar (parts joined by _, any order" in out.stdout
    assert all(name in out.stdout for name in ("traceattr", "keyvalue", "slash", "pipe", "dot", "underscore"))


@pytest.mark.slow
def test_a_run_folder_lists_shapes_by_ctx(exports: dict[str, Path], tmp_path: Path, monkeypatch) -> None:
    """summary.csv and summary.json of `profile` go by ctx (8k … 900k), as the terminal and the HTML do, not as
    text (131k, 32k, 512k, 8k, 900k); the capture stands in for nsys with the real run's export and runner.json."""
    from traceattr.jobs import profile as job
    from traceattr.jobs.capture import CaptureResult

    def capture(_nsys: Path, output: Path, _app: list[str], **_: object) -> CaptureResult:
        sqlite = output.with_suffix(".sqlite")
        shutil.copyfile(exports[SWEEP], sqlite)
        shutil.copyfile(DATA / SWEEP / "runner.json", output.parent / "runner.json")
        return CaptureResult(("nsys",), 0, output.with_suffix(".nsys-rep"), sqlite, ())

    monkeypatch.setattr(job, "capture", capture)
    monkeypatch.setattr(job, "require_runnable", lambda _plan: None)
    result = job.execute(make_plan([parse_shape("q8_ctx8k")], ["fa3"], out_root=tmp_path), report=False)
    ctx_order = [f"q8_ctx{c}_h16_b1_bf16_p64" for c in ("8k", "32k", "131k", "512k", "900k")]
    written = pl.read_csv(result.folder / "summary.csv")
    assert written["shape"].unique(maintain_order=True).to_list() == ctx_order
    from_json = pl.read_json(result.folder / "summary.json")
    assert from_json["shape"].unique(maintain_order=True).to_list() == ctx_order
    first = written.filter(pl.col("shape") == ctx_order[-1])
    assert first["median_us"].is_sorted() and first["backend"][0] == "flashmla"  # the fastest first in a shape
