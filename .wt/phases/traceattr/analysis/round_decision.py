"""A round's receipt as the decision: what ``compare``, ``report`` and ``dispatch`` say of a round folder.

A round (``traceattr round``) judges each row once, over all its captures, with its gates; the receipt holds
that judgement. Read as a :class:`~traceattr.analysis.decision.Decision`, every surface of a round folder says
exactly the receipt: a passing row's verdict (candidate faster: the candidate wins by the inverse of the
ratio; slower: the baseline wins by the ratio; same or ambiguous: a tie), a refused row as refused (no verdict,
no point of a family's line, so no rule rests on it), and each family's line judged by the receipt's own
intervals (:func:`traceattr.analysis.crossover.judged_crossings`).
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from traceattr.analysis.crossover import judged_crossings
from traceattr.analysis.decision import Decision, Provenance, decide
from traceattr.analysis.rounds import Receipt
from traceattr.analysis.stats import Comparison

_STATISTIC = "the round's ratio of medians (candidate / baseline) over its captures' paired calls, µs"


def receipt_decision(receipt: Receipt, source: str) -> Decision:
    """The decision the round's *receipt* (its latest attempt per row) states; *source*: its folder."""
    baseline, candidate = str(receipt.header.get("baseline")), str(receipt.header.get("candidate"))
    final = receipt.final
    passing = final.filter(pl.col("status") == "pass")
    refused = {r["shape"]: r["refused_by"] or "refused" for r in final.filter(pl.col("status") != "pass").to_dicts()}
    judged = {r["shape"]: r for r in passing.to_dicts()}
    summary = pl.DataFrame(
        [row for r in judged.values() for row in _summary_rows(r, baseline, candidate)],
        schema={
            "shape": pl.String,
            "backend": pl.String,
            "median_us": pl.Float64,
            "ratio_to_best": pl.Float64,
            "vs_best_low": pl.Float64,
            "vs_best_high": pl.Float64,
            "verdict": pl.String,
            "same_program_as": pl.String,
            "winner": pl.Boolean,
            "tie_pct": pl.Float64,
        },
        orient="row",
    )

    def judge(shape: str, below: str, above: str) -> Comparison:
        r = judged[shape]
        c = Comparison(r["ratio"], *_bounds(r), r["verdict"], r["pairs"], r["pairs"], 0.95)
        if below == baseline and above == candidate:
            return c
        flip = {"faster": "slower", "slower": "faster"}.get(c.verdict, c.verdict)
        return Comparison(_inv(c.ratio), _inv(c.high), _inv(c.low), flip, c.n_candidate, c.n_baseline, c.confidence)  # type: ignore[arg-type]

    gates = f"{source}: receipt of {candidate} vs {baseline}"
    return decide(
        summary, judged_crossings(summary, judge), Provenance(_STATISTIC, source=source, gates=gates), refused
    )


def _inv(x: float) -> float:
    return 1 / x if x else math.nan


def _bounds(r: dict[str, Any]) -> tuple[float, float]:
    low, high = r["low"], r["high"]
    return (math.nan if low is None else low, math.nan if high is None else high)


def _summary_rows(r: dict[str, Any], baseline: str, candidate: str) -> list[tuple]:
    """The two arms of one passing row as summary rows with the round's verdict."""
    ratio, (low, high) = r["ratio"], _bounds(r)
    shape, verdict = r["shape"], r["verdict"]
    times = {baseline: r["baseline_us"], candidate: r["candidate_us"]}
    if verdict == "faster":  # the candidate wins: the baseline takes 1/ratio of its time
        win, lose, m = candidate, baseline, (1 / ratio, 1 / high, 1 / low)
    elif verdict == "slower":
        win, lose, m = baseline, candidate, (ratio, low, high)
    else:  # same or ambiguous: a tie, as wide as the interval reaches from 1
        noise = 100 * max(1 - low, high - 1, 0.0) if math.isfinite(high - low) else None
        fast, slow = sorted(times, key=lambda b: (times[b], b))
        return [
            (shape, fast, times[fast], 1.0, 1.0, 1.0, "tie", None, False, noise),
            (shape, slow, times[slow], times[slow] / times[fast], None, None, "tie", None, False, noise),
        ]
    return [
        (shape, win, times[win], 1.0, 1.0, 1.0, "winner", None, True, None),
        (shape, lose, times[lose], m[0], m[1], m[2], "slower", None, False, None),
    ]
