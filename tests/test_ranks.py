"""Real DCP ranks (`traceattr profile --ranks N`): the plan, the per-rank commands and environments (CPU only)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.helpers import run
from traceattr.core.errors import TraceattrError
from traceattr.core.protocol import Protocol
from traceattr.core.shapes import parse_shape
from traceattr.jobs.rank_runs import NO_MULTICAST, make_ranks_plan


def test_plan_one_process_and_one_report_per_rank(tmp_path: Path) -> None:
    plan = make_ranks_plan(parse_shape("q8_ctx1m_dcp2"), 2, "fa3", protocol=Protocol(iters=5), out_root=tmp_path)
    assert plan.shards() == [500_000, 500_000] and plan.folder.parent == tmp_path
    outputs = set()
    for r in range(2):
        env, cmd = plan.env(r), plan.command(r)
        assert env["RANK"] == env["LOCAL_RANK"] == str(r) and env["WORLD_SIZE"] == "2"
        assert env["NCCL_NVLS_ENABLE"] == "0" and NO_MULTICAST.items() <= env.items()  # multicast stays off
        assert cmd[1] == "profile" and "--sample=none" in cmd and "--cpuctxsw=none" in cmd
        assert cmd[cmd.index("-m") + 1] == "traceattr.runner.ranks"
        outputs |= {a for a in cmd if a.startswith("--output=")}
    assert outputs == {f"--output={plan.folder / 'rank0'}", f"--output={plan.folder / 'rank1'}"}
    runner = plan.runner_plan()
    assert runner["shape"] == "q8_ctx1m_h16_b1_bf16_p64_dcp2" and runner["iters"] == 5 and runner["arm"] == "fa3"
    uneven = make_ranks_plan(parse_shape("q8_ctx1000001_dcp3"), 3, out_root=tmp_path)
    assert uneven.shards() == [333_334, 333_334, 333_333] and sum(uneven.shards()) == 1_000_001


@pytest.mark.parametrize(
    ("shape", "ranks", "arm", "needle"),
    [("q8_ctx1m", 2, "fa3", "needs a shape with dcp2"), ("q8_ctx1m_dcp4", 2, "fa3", "needs a shape with dcp2"),
     ("q8_ctx1m_dcp2", 1, "fa3", "at least 2"), ("q8_ctx1m_dcp2", 2, "x=fa3", "one plain backend")],
)  # fmt: skip
def test_plan_refusals(tmp_path: Path, shape: str, ranks: int, arm: str, needle: str) -> None:
    with pytest.raises(TraceattrError, match=needle):
        make_ranks_plan(parse_shape(shape), ranks, arm, out_root=tmp_path)


@pytest.mark.slow
def test_dry_run_prints_every_rank(tmp_path: Path) -> None:
    out = run("profile", "--shape", "q8_ctx1m_dcp2", "--ranks", "2", "--dry-run", "--out-root", str(tmp_path))
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "rank 0: 500,000 tokens" in text and "rank 1: 500,000 tokens" in text
    assert "NCCL_NVLS_ENABLE=0" in text and "traceattr.runner.ranks" in text
    assert not any(tmp_path.iterdir())  # a dry run creates nothing
    bad = run("profile", "--shape", "q8_ctx1m", "--ranks", "2", "--dry-run")
    assert bad.returncode == 2 and "dcp2" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    ignored = run("profile", "--shape", "q8_ctx1m_dcp2", "--ranks", "2", "--graphs", "--hold-us", "50", "--dry-run")
    assert ignored.returncode == 2 and len(ignored.stderr.strip().splitlines()) == 1
    assert "--ranks does not take --graphs, --hold-us" in ignored.stderr  # refused, not silently ignored


@pytest.mark.parametrize(("gpus", "refused"), [(1, True), (2, False)])
def test_a_run_needs_one_gpu_per_rank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpus: int,
                                      refused: bool) -> None:  # fmt: skip
    """Checked before any folder or process: on one GPU both ranks would share it and fail inside NCCL."""
    from traceattr.jobs import rank_runs

    plan = make_ranks_plan(parse_shape("q8_ctx1m_dcp2"), 2, out_root=tmp_path)
    monkeypatch.setattr(rank_runs, "gpu_count", lambda: gpus)
    monkeypatch.setattr(rank_runs.subprocess, "Popen", lambda *a, **k: (_ for _ in ()).throw(OSError("started")))
    with pytest.raises(TraceattrError if refused else OSError) as err:
        rank_runs.execute_ranks(replace(plan, nsys=Path("/usr/bin/true")))
    if refused:
        assert str(err.value) == "--ranks 2 needs 2 GPUs, one per rank; this machine has 1"
        assert not plan.folder.exists()
