"""compare's per-shape tables: in the summary's one order (by ctx, the fastest first); a sweep folder's name."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from traceattr.analysis.pipeline import analyse
from traceattr.attribution.engine import attribute
from traceattr.jobs.sweep import plan_sweep
from traceattr.present.comparison import render_summary
from traceattr.trace.loader import load_trace

EXAMPLE = Path(__file__).parents[1] / "examples" / "traces" / "h200_mla_sweep.sqlite"


def test_tables_go_by_ctx_whatever_order_they_are_given() -> None:
    summary = analyse(attribute(load_trace(EXAMPLE))).summary
    out = io.StringIO()
    render_summary(summary.sort("shape", "backend"), Console(file=out, width=200), [])  # as text, backends A–Z
    text = out.getvalue()
    where = [text.index(f"q8_ctx{c}_h16_b1_bf16_p64:") for c in ("8k", "32k", "131k", "512k", "900k")]
    assert where == sorted(where), text
    table_900k = text[where[-1] :]
    assert table_900k.index("flashmla") < table_900k.index("fa3 ") < table_900k.index("fa2")  # fastest first


def test_a_sweep_folder_keeps_the_family_readable(tmp_path: Path) -> None:
    plan = plan_sweep("q8_ctx*", ("fa3", "flashmla"), "32k:1m", tmp_path)
    assert plan.folder.name.endswith("_sweep_q8_ctx_eager")
