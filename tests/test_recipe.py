"""recipes/traceattr_attribution under NVIDIA's own recipe framework (`nsys recipe`), in its three modes.

Needs an nsys with the recipe framework (the CPU-only 2023.4 CLI does: `bash
../shared/nsys-cpu/recipes.sh`) and the framework's Python packages in this
venv (`pip install -e '.[recipe,multi]'`). Skipped where they are missing,
except in CI (`CI=true`), where `.ci/run` installs them and a missing piece fails.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from tests.helpers import IN_CI, rank_trace
from traceattr.jobs import many
from traceattr.trace.nsys import find_nsys

RECIPES = Path(__file__).resolve().parent.parent / "recipes"
NAME = "traceattr_attribution"
FRAMEWORK_NEEDS = ("pandas", "pyarrow", "psutil", "distributed")


def _missing() -> str | None:
    nsys = find_nsys()
    if nsys is None:
        return "no nsys found (TRACEATTR_NSYS, PATH, standard folders)"
    lacking = [m for m in FRAMEWORK_NEEDS if importlib.util.find_spec(m) is None]
    if lacking:
        return f"the recipe framework's packages are missing: {', '.join(lacking)} (pip install -e '.[recipe,multi]')"
    return None


@pytest.fixture(scope="module")
def nsys() -> Path:
    reason = _missing()
    if reason is not None:
        if IN_CI:
            pytest.fail(f"CI must run the recipe test: {reason}")
        pytest.skip(reason)
    return find_nsys()  # type: ignore[return-value]


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory, exports: dict[str, Path]) -> Path:
    """Two ranks, a real export and a damaged one, as nsys 2023.4 takes them: an (empty) .nsys-rep with a
    newer <name>.sqlite beside it, so the framework (and traceattr) reuse the export instead of re-exporting."""
    folder = tmp_path_factory.mktemp("reps")
    for name in ("rank0", "rank1", "tiny", "broken"):
        (folder / f"{name}.nsys-rep").write_bytes(b"")
    old = 1_000_000_000
    for rep in folder.iterdir():
        os.utime(rep, (old, old))
    rank_trace(folder / "rank0.sqlite", [10_000, 10_000])
    rank_trace(folder / "rank1.sqlite", [12_000, 30_000])
    (folder / "tiny.sqlite").write_bytes(exports["h200_torch_tiny"].read_bytes())
    (folder / "broken.sqlite").write_bytes(b"not a database")
    return folder


def _recipe(nsys: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "NSYS_RECIPE_PATH": str(RECIPES),
        # `nsys recipe` runs the `python3` it finds first: this venv's, which has traceattr
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "NSYS_CONCURRENT_MAX_WORKERS": "2",  # concurrent mode: ProcessPoolExecutor(max_workers=2)
        "NSYS_DASK_N_WORKERS": "2",  # dask-futures mode: Client(n_workers=2, …), a local cluster
        "NSYS_DASK_THREADS_PER_WORKER": "1",
        "NSYS_DASK_DASHBOARD_ADDRESS": ":0",
    }
    return subprocess.run(
        [str(nsys), "recipe", NAME, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )


@pytest.mark.parametrize("mode", ["none", "concurrent", "dask-futures"])
@pytest.mark.slow
def test_recipe_equals_traceattr_attribute(nsys: Path, reports: Path, tmp_path: Path, mode: str) -> None:
    out = tmp_path / "recipe"
    res = _recipe(nsys, tmp_path, "--input", str(reports), "--mode", mode, "--output", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "broken.sqlite" in res.stdout + res.stderr  # the damaged report is named, the others are written
    written = sorted(p.name for p in out.iterdir())
    assert written == sorted(["across_traces.parquet", "kernels.parquet", "ranges.parquet", "traces.parquet",
                              "recipe.nsys-analysis"])  # fmt: skip
    # traceattr's own multi-report run over the exports gives the same tables
    exports = sorted(reports.glob("*.sqlite"))
    with many.parts_folder(tmp_path / "cli") as parts:
        combined = many.combine(many.run_traces(exports, many.Settings(), workers=1, parts=parts))
        many.write_combined(combined, tmp_path / "cli", "parquet")
    for stem in ("ranges", "kernels", "across_traces"):
        assert_frame_equal(
            pl.read_parquet(out / f"{stem}.parquet"), pl.read_parquet(tmp_path / "cli" / f"{stem}.parquet")
        )
    volatile = ["path", "seconds", "worker_pid", "worker_peak_rss_mb"]
    per_rank = pl.read_parquet(out / "traces.parquet")
    assert_frame_equal(per_rank.drop(volatile), pl.read_parquet(tmp_path / "cli" / "traces.parquet").drop(volatile))
    assert per_rank["trace"].to_list() == ["broken", "rank0", "rank1", "tiny"]
    assert per_rank["ok"].to_list() == [False, True, True, True]
    across = pl.read_parquet(out / "across_traces.parquet").filter(pl.col("name") == "dcp:attention")
    assert across["slowest_trace"].to_list() == ["rank1"] and across["rank_max_gpu_span_ns"].to_list() == [21_000]


def test_recipe_bad_rules_stop_once(nsys: Path, reports: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[[rule]]\nrole='nope'\npattern='x'\n", encoding="utf-8")
    out = tmp_path / "recipe"
    res = _recipe(nsys, tmp_path, "--input", str(reports), "--mode", "none", "--rules", str(bad), "--output", str(out))
    assert res.returncode != 0 and (res.stdout + res.stderr).count("role must be one of") == 1
    assert not out.exists()  # the framework removes its output folder on failure


@pytest.mark.slow
def test_recipe_reads_a_folder_of_exports_as_readme_says(nsys: Path, tmp_path: Path) -> None:
    """`--input ranks/` with only `.sqlite` exports in it (what `traceattr attribute ranks/` reads): the framework's
    own `--input` takes `.nsys-rep` files alone and refused this folder."""
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    rank_trace(ranks / "rank0.sqlite", [10_000, 10_000])
    rank_trace(ranks / "rank1.sqlite", [12_000, 30_000])
    res = _recipe(nsys, tmp_path, "--input", "ranks/", "--mode", "none", "--output", "out")
    assert res.returncode == 0, res.stdout + res.stderr
    assert pl.read_parquet(tmp_path / "out" / "traces.parquet")["trace"].to_list() == ["rank0", "rank1"]
    # the framework's DIR:N (a folder's first N traces) and a quoted pattern, as `traceattr attribute` takes one
    res = _recipe(nsys, tmp_path, "--input", "ranks:1", str(ranks / "rank1.*"), "--mode", "none", "--output", "two")
    assert res.returncode == 0, res.stdout + res.stderr
    assert pl.read_parquet(tmp_path / "two" / "traces.parquet")["trace"].to_list() == ["rank0", "rank1"]


@pytest.mark.slow
def test_recipe_input_without_traces_is_refused_by_name(nsys: Path, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    res = _recipe(nsys, tmp_path, "--input", "empty", "--mode", "none", "--output", "out")
    said = res.stdout + res.stderr
    assert res.returncode != 0 and "argument --input: empty: is a directory without nsys exports" in said, said
    assert not (tmp_path / "out").exists()
