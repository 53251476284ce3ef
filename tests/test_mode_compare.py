"""Eager against --graphs on the H200 q8 sweeps: no flip at the seven common ctx, a 419-token range between the two
tables' breakpoints, no measured regret for shipping the eager table inside graphs; a mutated record shows a flip,
its range and its regret."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

pytest.importorskip("polars")

from traceattr.analysis.mode_compare import Flip, FlipRange, compare_modes
from traceattr.core.errors import TraceattrError
from traceattr.core.records import SweepRecord

SWEEPS = Path(__file__).resolve().parent.parent / "examples" / "sweeps"
EAGER = SWEEPS / "h200_q8_fa3_flashmla_eager_lead.json"
GRAPHS = SWEEPS / "h200_q8_fa3_flashmla_graphs_lead.json"


def cuts(segments) -> list[tuple[int | None, str]]:  # type: ignore[no-untyped-def]
    return [(s.ctx_from, s.backend) for s in segments]


def test_the_h200_q8_sweeps_agree_across_modes() -> None:
    """The numbers examples/decode/README.md states ("The eager table inside graphs")."""
    c = compare_modes(SweepRecord.read(EAGER), SweepRecord.read(GRAPHS))
    assert c.family == "q8_ctx*"
    assert c.common_ctx == (32000, 73800, 112000, 138000, 153000, 170000, 900000)
    # the tables traceattr dispatch writes for each sweep alone: the medians cross 419 tokens apart
    assert cuts(c.eager.segments) == [(None, "fa3"), (151_390, "flashmla")]
    assert cuts(c.graphs.segments) == [(None, "fa3"), (151_809, "flashmla")]
    assert c.flips == ()  # the same fastest arm at every common ctx
    (flip,) = c.flip_ranges
    assert (flip.ctx_from, flip.ctx_to, flip.eager, flip.graphs, flip.graphs_measured) == (
        151_390, 151_809, "flashmla", "fa3", ())  # fmt: skip
    # between 138k and 153k: log t interpolated, flashmla 0.7% slower at the range's low end, 0 at its top
    assert flip.interpolated_max == pytest.approx(0.0071, abs=1e-4)
    assert (c.regret.mean, c.regret.max, c.regret.right, c.regret.shapes) == (0.0, 0.0, 7, 7)
    assert all(s.regret == 0.0 and s.eager_choice == s.fastest for s in c.shipped)
    # what differs is how sure each mode is at 153k: decided eager (0.973), a tie within noise with graphs
    at = {p.ctx: p for p in c.eager.points}, {p.ctx: p for p in c.graphs.points}
    assert at[0][153000].good == {"flashmla"} and at[1][153000].good == {"fa3", "flashmla"}
    assert at[0][153000].fastest == at[1][153000].fastest == "flashmla"


def test_a_flip_shows_its_range_and_its_regret() -> None:
    doc = json.loads(GRAPHS.read_text(encoding="utf-8"))
    changed = copy.deepcopy(doc)
    for step in changed["steps"]:
        for p in step["points"]:
            if p["ctx"] == 138000:
                p["medians_us"] = {"fa3": 91.3, "flashmla": 85.0}
                p.update(side="above", verdict="faster", ratio=85.0 / 91.3, low=0.92, high=0.94, fastest="flashmla")
    c = compare_modes(SweepRecord.read(EAGER), SweepRecord.from_json(changed, GRAPHS))
    assert c.flips == (Flip(138000, "fa3", "flashmla", True, True),)
    # the graphs medians now cross between 112k (fa3 78.4955, flashmla 85.5035) and 138k, log-linear in ctx
    d0, d1 = math.log(85.5035 / 78.4955), math.log(85.0 / 91.3)
    cut = math.exp(math.log(112000) + d0 / (d0 - d1) * math.log(138000 / 112000))
    (_, below), (g_cut, above) = cuts(c.graphs.segments)
    assert (below, above) == ("fa3", "flashmla") and g_cut == pytest.approx(cut, abs=1)
    assert c.flip_ranges == (
        FlipRange(g_cut, 151_390, "fa3", "flashmla", (138000,), c.flip_ranges[0].interpolated_max),
    )
    assert c.flip_ranges[0].interpolated_max == pytest.approx(91.3 / 85.0 - 1, abs=1e-6)  # worst at the point itself
    assert c.regret.max == pytest.approx(91.3 / 85.0 - 1)
    assert c.regret.mean == pytest.approx((91.3 / 85.0 - 1) / 7)
    assert (c.regret.right, c.regret.shapes) == (6, 7)


def test_records_of_the_wrong_mode_or_family_are_refused() -> None:
    eager, graphs = SweepRecord.read(EAGER), SweepRecord.read(GRAPHS)
    with pytest.raises(TraceattrError, match="measured with graphs=True"):
        compare_modes(graphs, graphs)
    other = json.loads(GRAPHS.read_text(encoding="utf-8"))
    other["family"] = "q4_ctx*"
    with pytest.raises(TraceattrError, match="two families"):
        compare_modes(eager, SweepRecord.from_json(other, GRAPHS))
