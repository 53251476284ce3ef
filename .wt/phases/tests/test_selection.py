"""attribution.selection: a --domain/--match filter chooses rows; the facts stay the trace's."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from tests.synth.builder import TraceBuilder
from traceattr.analysis.calls import calls
from traceattr.attribution.engine import attribute
from traceattr.attribution.selection import RangeFilter
from traceattr.trace.loader import load_trace


def _nested(path: Path) -> Path:
    """call (0–100 µs) ⊃ wrap (10–90 µs, not chosen) ⊃ inner (20–80 µs, chosen); a kernel in each of the three."""
    b = TraceBuilder()
    us = 1_000
    b.push_range(tid=1, start=0, end=100 * us, message="fa3 q1_ctx8k call")
    b.push_range(tid=1, start=10 * us, end=90 * us, message="wrap")
    b.push_range(tid=1, start=20 * us, end=80 * us, message="fa3 q1_ctx8k inner")
    b.launch(tid=1, start=5 * us, end=6 * us, kernel="k_call", gpu_start=200 * us, gpu_end=210 * us)
    b.launch(tid=1, start=15 * us, end=16 * us, kernel="k_wrap", gpu_start=210 * us, gpu_end=230 * us)
    b.launch(tid=1, start=25 * us, end=26 * us, kernel="k_inner", gpu_start=230 * us, gpu_end=260 * us)
    return b.write(path)


def test_filtered_rows_keep_the_trace_facts_and_calls_own_their_subtree(tmp_path: Path) -> None:
    trace = load_trace(_nested(tmp_path / "n.sqlite"))
    whole = attribute(trace).ranges.filter(pl.col("range_id").is_not_null())
    att = attribute(trace, select=RangeFilter(match=r"q1_ctx8k"))
    rows = att.ranges.filter(pl.col("range_id").is_not_null())
    assert sorted(rows["name"].to_list()) == ["fa3 q1_ctx8k call", "fa3 q1_ctx8k inner"]
    facts = ["range_id", "level", "parent_id", "num_child", "gpu_ops", "gpu_span_ns", "kernel_sum_ns"]
    assert (
        rows.select(facts)
        .sort("range_id")
        .equals(whole.join(rows.select("range_id"), on="range_id").select(facts).sort("range_id"))
    )
    inner = rows.filter(pl.col("name") == "fa3 q1_ctx8k inner").row(0, named=True)
    assert inner["level"] == 2 and inner["parent_id"] is not None  # its parent is the unchosen wrap range
    # an op belongs to its innermost chosen range: k_wrap to the call (wrap is not chosen), k_inner to inner
    owner = att.ops.select("name", "range_name").sort("name")
    assert owner.rows() == [("k_call", "fa3 q1_ctx8k call"), ("k_inner", "fa3 q1_ctx8k inner"),
                            ("k_wrap", "fa3 q1_ctx8k call")]  # fmt: skip
    # the call's parts partition its span over all three kernels, through the unchosen wrap range
    c = calls(att, r"^(?P<backend>\S+) (?P<shape>\S+) (?P<arm>call|inner)$")
    call = c.filter(pl.col("arm") == "call").row(0, named=True)
    assert call["gpu_span_ns"] == 60_000 and call["other_exposed_ns"] + call["gap_ns"] == 60_000
