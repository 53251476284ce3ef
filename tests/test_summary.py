"""The summary's one order (shapes of a family by ctx, the fastest backend first), which every writer keeps."""

from __future__ import annotations

import polars as pl

from traceattr.analysis.summary import in_context_order


def test_summary_rows_go_by_ctx_not_as_text() -> None:
    shapes = ["q8_ctx131k", "q8_ctx32k", "q8_ctx512k", "q8_ctx8k", "q8_ctx900k", "q1_ctx1m", "nccl_allreduce"]
    summary = pl.DataFrame({
        "shape": [s for s in shapes for _ in range(2)],
        "backend": ["fa3", "flashmla"] * len(shapes),
        "median_us": [2.0, 1.0] * len(shapes),
    })  # fmt: skip
    ordered = in_context_order(summary)
    assert ordered["shape"].unique(maintain_order=True).to_list() == [
        "nccl_allreduce", "q1_ctx1m", "q8_ctx8k", "q8_ctx32k", "q8_ctx131k", "q8_ctx512k", "q8_ctx900k",
    ]  # fmt: skip
    assert ordered["backend"].head(2).to_list() == ["flashmla", "fa3"] and ordered.columns == summary.columns


def test_ties_and_missing_medians_have_one_order() -> None:
    summary = pl.DataFrame({"shape": ["q8_ctx8k"] * 3, "backend": ["b", "a", "c"], "median_us": [1.0, 1.0, None]})
    assert in_context_order(summary)["backend"].to_list() == ["a", "b", "c"]
    assert in_context_order(summary.head(0)).height == 0
