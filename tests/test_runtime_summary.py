"""The decode receipt's math on hand-made timings: totals, oracle, gain, regret, intervals, the derived table."""

from __future__ import annotations

import pytest

from traceattr.jobs.decode_summary import derive_family, summarize
from traceattr.runtime.table import FamilyKey, Segment

pytest.importorskip("scipy")

# 3 steps × 4 iterations: fa3 wins the first two steps, flashmla the last
FA3 = [[10.0, 10.2, 9.8, 10.0], [20.0, 20.0, 20.0, 20.0], [40.0, 41.0, 39.0, 40.0]]
FMLA = [[12.0, 12.0, 12.0, 12.0], [25.0, 25.0, 25.0, 25.0], [30.0, 30.0, 30.0, 30.0]]


def test_a_dispatcher_that_chose_right_matches_the_oracle() -> None:
    disp = [FA3[0], FA3[1], FMLA[2]]
    s = summarize({"fa3": FA3, "flashmla": FMLA, "dispatch": disp}, ("fa3", "flashmla"), "dispatch",
                  ["fa3", "fa3", "flashmla"], [8000, 100_000, 900_000])  # fmt: skip
    assert s.totals["fa3"].value == pytest.approx(70.0)
    assert s.totals["flashmla"].value == pytest.approx(67.0)
    assert s.best_fixed == "flashmla"
    assert s.oracle.value == pytest.approx(60.0)
    assert s.totals["dispatch"].value == pytest.approx(60.0)
    assert s.gain.value == pytest.approx(1 - 60 / 67)
    assert s.regret.value == pytest.approx(0.0)
    assert s.gain_vs["fa3"].value == pytest.approx(1 - 60 / 70) and s.gain_vs["flashmla"] == s.gain
    assert s.modelled_regret == pytest.approx(0.0)
    assert s.switches == 1 and s.right == 3 and s.fastest == ("fa3", "fa3", "flashmla")
    for iv in (s.totals["fa3"], s.gain, s.oracle):
        assert iv.lo <= iv.value <= iv.hi
    assert s.totals["fa3"].lo < s.totals["fa3"].hi  # fa3's iterations differ: a real interval
    assert s.totals["flashmla"].lo == s.totals["flashmla"].hi == 67.0  # identical iterations: none


def test_a_wrong_choice_shows_as_regret() -> None:
    disp = [FA3[0], FMLA[1], FMLA[2]]
    s = summarize({"fa3": FA3, "flashmla": FMLA, "dispatch": disp}, ("fa3", "flashmla"), "dispatch",
                  ["fa3", "flashmla", "flashmla"], [1, 2, 3])  # fmt: skip
    assert s.regret.value == pytest.approx(65 / 60 - 1)
    assert s.modelled_regret == pytest.approx(65 / 60 - 1)
    assert s.right == 2


def test_inconsistent_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="2 choices for 3 steps"):
        summarize({"a": FA3, "d": FA3}, ("a",), "d", ["a", "a"], [1, 2, 3])
    with pytest.raises(ValueError, match="chose b, not among the fixed arms a"):
        summarize({"a": FA3, "d": FA3}, ("a",), "d", ["a", "b", "a"], [1, 2, 3])


def test_derive_family_cuts_at_the_geometric_middle() -> None:
    key = FamilyKey(1, 16, 1)
    fam = derive_family("q1_ctx*", key, [64_000, 8000, 512_000], {"fa3": [50, 30, 170], "s4": [40, 20, 180]})
    assert fam.segments == (Segment(None, 181_019, "s4"), Segment(181_019, None, "fa3"))
    assert fam.measured_ctx == (8000, 64_000, 512_000)
    one = derive_family("q1_ctx*", key, [8000], {"fa3": [1.0], "s4": [2.0]})
    assert one.segments == (Segment(None, None, "fa3"),)
