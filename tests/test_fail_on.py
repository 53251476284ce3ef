"""traceattr.analysis.fail_on: the --fail-on conditions, parsed once and checked against a Decision; each
condition met is one sentence (what a CI log shows)."""

from __future__ import annotations

import polars as pl
import pytest

from traceattr.analysis.decision import Breakpoint, Decision, FamilyVerdict, ShapeVerdict
from traceattr.analysis.fail_on import CONDITIONS, Condition, diff_failures, failures, parse_conditions
from traceattr.core.errors import TraceattrError

WON = ShapeVerdict("q1_ctx1k", "winner", "fa3", runner_up="fa2", medians_us={"fa2": 12.0, "fa3": 10.0})
TIED = ShapeVerdict("q1_ctx4k", "tie", "fa2", tied=("fa2", "fa3"), medians_us={"fa2": 20.0, "fa3": 20.1})
ALONE = ShapeVerdict("q1_ctx8k", "alone", "fa2", medians_us={"fa2": 30.0})
# fa3-per-token runs fa3's program at this shape: it is never said to lose
TWIN = ShapeVerdict("q1_ctx2k", "winner", "fa3", medians_us={"fa3": 10.0, "fa3-per-token": 10.5},
                    same_program=(("fa3-per-token", "fa3"),))  # fmt: skip
SWITCH = FamilyVerdict("q1", (1024, 4096), "undecided", (), (Breakpoint(2048, "fa3", "fa2", (1024, 4096), False),), ())


def met(decision: Decision, *conditions: str) -> list[str]:
    return failures(decision, parse_conditions(conditions))


def test_parse_words_and_arms() -> None:
    assert parse_conditions(["tie", "loses:fa3"]) == (Condition("tie"), Condition("loses", "fa3"))
    assert str(Condition("loses", "fa3")) == "loses:fa3" and str(Condition("refused")) == "refused"
    assert set(CONDITIONS) == {"undecided", "tie", "loses", "refused"}
    for bad, says in (("slow", "not a condition"), ("loses", "write it as loses:ARM"), ("tie:fa3", "write it as tie")):
        with pytest.raises(TraceattrError, match=says):
            Condition.parse(bad)


def test_a_clear_decision_fails_nothing() -> None:
    assert met(Decision((WON, TWIN), ()), "undecided", "tie", "refused", "loses:fa3", "loses:fa3-per-token") == []


def test_tie_and_undecided() -> None:
    d = Decision((WON, TIED, ALONE), (SWITCH,))
    assert met(d, "tie") == ["--fail-on tie: 1 shape(s) without a winner (q1_ctx4k)"]
    # undecided also counts a shape with one backend and a family switch within noise
    assert met(d, "undecided") == [
        "--fail-on undecided: 2 shape(s) without a winner (q1_ctx4k, q1_ctx8k); a switch within noise in q1"
    ]
    assert met(Decision((WON,), (SWITCH,)), "tie") == []  # a tie of a switch is no tied shape


def test_loses_names_the_shapes_an_arm_was_really_slower_at() -> None:
    d = Decision((WON, TIED, ALONE, TWIN), ())
    # fa2 lost q1_ctx1k to fa3; it is in the q1_ctx4k tie and alone at 8k: neither is a loss
    assert met(d, "loses:fa2") == ["--fail-on loses:fa2: fa2 is really slower than the winner at q1_ctx1k"]
    assert met(d, "loses:fa3") == [] and met(d, "loses:flashmla") == []  # a winner; an arm never measured
    assert met(d, "loses:fa3-per-token") == []  # the same program as the winner is not slower than it
    out_of_tie = ShapeVerdict("q1_ctx16k", "tie", "fa2", tied=("fa2", "fa3"), medians_us={"fa2": 1, "fa3": 1, "x": 9})
    assert met(Decision((out_of_tie,), ()), "loses:x") == ["--fail-on loses:x: x is really slower than the winner at "
                                                          "q1_ctx16k"]  # fmt: skip


def test_refused_lists_the_refused_rows() -> None:
    d = Decision((WON,), (), refused={"q1_ctx4k": "clock", "q1_ctx1k": "order"})
    assert met(d, "refused") == ["--fail-on refused: the round refused q1_ctx1k, q1_ctx4k"]
    assert met(Decision((WON,), ()), "refused") == []


def tallies(verdicts: list[str | None]) -> pl.DataFrame:
    n = len(verdicts)
    return pl.DataFrame({"level": ["kernel"] * n, "name": [f"k{i}" for i in range(n)],
                         "per_call_pct": [10.0 * (i + 1) for i in range(n)], "per_call_verdict": verdicts},
                        schema_overrides={"per_call_verdict": pl.String})  # fmt: skip


def test_diff_slower_names_at_most_five_and_counts_the_rest() -> None:
    assert diff_failures(tallies(["same", "faster"]), ["slower"]) == []
    assert diff_failures(tallies(["slower", "same"]), ["slower"]) == [
        "--fail-on slower: slower per call after: kernel k0 (+10.0%)"
    ]
    many = diff_failures(tallies(["slower"] * 7), ["slower"])
    assert many[0].endswith("kernel k4 (+50.0%) and 2 more") and "k5" not in many[0]


def test_diff_conditions_are_checked() -> None:
    with pytest.raises(TraceattrError, match="not a diff condition"):
        diff_failures(tallies(["slower"]), ["tie"])
    with pytest.raises(TraceattrError, match="two or more captures a side"):
        diff_failures(tallies([None, None]), ["slower"])  # one capture a side: no interval, no verdict
