"""compare's tables and files in one order: shapes of a family by ctx, the fastest backend first."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from traceattr.jobs.sweep import plan_sweep
from traceattr.present.comparison import by_context


def test_summary_rows_go_by_ctx_not_as_text() -> None:
    shapes = ["q8_ctx131k", "q8_ctx32k", "q8_ctx512k", "q8_ctx8k", "q8_ctx900k"]
    summary = pl.DataFrame({
        "shape": [s for s in shapes for _ in range(2)],
        "backend": ["fa3", "flashmla"] * 5,
        "median_us": [2.0, 1.0] * 5,
    })  # fmt: skip
    ordered = by_context(summary)
    assert ordered["shape"].unique(maintain_order=True).to_list() == [
        "q8_ctx8k", "q8_ctx32k", "q8_ctx131k", "q8_ctx512k", "q8_ctx900k",
    ]  # fmt: skip
    assert ordered["backend"].head(2).to_list() == ["flashmla", "fa3"] and ordered.columns == summary.columns


def test_a_sweep_folder_keeps_the_family_readable(tmp_path: Path) -> None:
    plan = plan_sweep("q8_ctx*", ("fa3", "flashmla"), "32k:1m", tmp_path)
    assert plan.folder.name.endswith("_sweep_q8_ctx_eager")
