"""Eager against --graphs on the H200 q8 sweeps: no flip at the seven common ctx, no regret for shipping the
eager table inside graphs; a mutated record shows a flip, its range and its regret."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

pytest.importorskip("polars")

from traceattr.analysis.mode_compare import Flip, compare_modes
from traceattr.core.errors import TraceattrError
from traceattr.core.records import SearchRecord

SWEEPS = Path(__file__).resolve().parent.parent / "examples" / "sweeps"
EAGER = SWEEPS / "h200_q8_fa3_flashmla_eager_lead.json"
GRAPHS = SWEEPS / "h200_q8_fa3_flashmla_graphs_lead.json"


def test_the_h200_q8_sweeps_agree_across_modes() -> None:
    c = compare_modes(SearchRecord.read(EAGER), SearchRecord.read(GRAPHS))
    assert c.family == "q8_ctx*" and c.arms == ("fa3", "flashmla")
    assert c.common_ctx == (32000, 73800, 112000, 138000, 153000, 170000, 900000)
    assert c.eager_table == c.graphs_table == ((None, 145307, "fa3"), (145307, None, "flashmla"))
    assert c.flips == () and c.flip_ranges == ()
    assert c.regret_mean == c.regret_max == 0.0
    # what differs is how sure each mode is at 153k: decided eager (0.973), a tie within noise with graphs
    at = {p.ctx: p for p in c.eager}, {p.ctx: p for p in c.graphs}
    assert at[0][153000].decided and not at[1][153000].decided
    assert at[0][153000].fastest == at[1][153000].fastest == "flashmla"


def test_a_flip_shows_its_range_and_its_regret() -> None:
    doc = json.loads(GRAPHS.read_text(encoding="utf-8"))
    changed = copy.deepcopy(doc)
    for step in changed["steps"]:
        for p in step["points"]:
            if p["ctx"] == 138000:
                p["medians_us"] = {"fa3": 91.3, "flashmla": 85.0}
                p.update(side="above", verdict="faster", ratio=85.0 / 91.3, low=0.92, high=0.94, fastest="flashmla")
    c = compare_modes(SearchRecord.read(EAGER), SearchRecord.from_json(changed, GRAPHS))
    assert c.flips == (Flip(138000, "fa3", "flashmla", True, True),)
    cut = round(math.sqrt(112000 * 138000))
    assert c.graphs_table == ((None, cut, "fa3"), (cut, None, "flashmla"))
    assert c.flip_ranges == ((cut, 145307, "fa3", "flashmla"),)
    assert c.regret_under_graphs[138000] == pytest.approx(91.3 / 85.0 - 1)
    assert c.regret_max == pytest.approx(91.3 / 85.0 - 1)
    assert c.regret_mean == pytest.approx((91.3 / 85.0 - 1) / 7)


def test_records_of_the_wrong_mode_or_family_are_refused() -> None:
    eager, graphs = SearchRecord.read(EAGER), SearchRecord.read(GRAPHS)
    with pytest.raises(TraceattrError, match="measured with graphs=True"):
        compare_modes(graphs, graphs)
    other = json.loads(GRAPHS.read_text(encoding="utf-8"))
    other["family"] = "q4_ctx*"
    with pytest.raises(TraceattrError, match="two families"):
        compare_modes(eager, SearchRecord.from_json(other, GRAPHS))
