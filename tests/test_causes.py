"""traceattr.analysis.causes: why a round refused a row, from its captures' evidence (predecessor split,
host-bound calls, drift, two groups of spans, the gates' notes), on small hand-made rows and calls."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest

from traceattr.analysis.causes import (
    BIMODAL_TAIL,
    KINDS,
    bimodal,
    cause_kinds,
    drift,
    hold_numbers,
    host_bound_refusal,
    predecessor_shift,
    predecessor_split,
    row_values,
)
from traceattr.analysis.hostbound import HOST_SHARE

LIMIT = 0.02  # a directional limit: 2%


def test_predecessor_split_tells_after_self_from_after_other() -> None:
    # ABBA in one capture and row: A B B A A B B A; after the other arm a call is 1 µs slower
    order = "ABBAABBA" * 3
    t, rows = 0, []
    for i, arm in enumerate(order):
        after_other = i > 0 and order[i - 1] != arm
        rows.append((0, "s", arm, t, 10.0 + (1.0 if after_other else 0.0) + 0.01 * (i % 3)))
        t += 100
    calls = pl.DataFrame(rows, schema=["capture", "shape", "backend", "start_ns", "t_us"], orient="row")
    got = {(r["backend"], r["after"]): r for r in predecessor_split(calls.sample(fraction=1, shuffle=True, seed=1))
           .iter_rows(named=True)}  # fmt: skip
    assert set(got) == {("A", "self"), ("A", "other"), ("B", "self"), ("B", "other")}
    assert sum(r["n"] for r in got.values()) == len(order) - 1  # the first call follows nothing
    assert got["A", "other"]["median"] == pytest.approx(11.0, abs=0.03)
    assert got["A", "self"]["median"] == pytest.approx(10.0, abs=0.03)


def test_bimodal_finds_two_groups_away_from_the_tails() -> None:
    one = np.linspace(100, 101, 40)
    lo, hi, share = bimodal(np.concatenate([one, one + 20]))  # type: ignore[misc]
    assert lo == pytest.approx(100.5) and hi == pytest.approx(120.5) and share == 0.5
    assert bimodal(one) is None  # evenly spaced: no gap stands out
    outliers = np.concatenate([one, [150.0, 151.0]])  # a gap in the tail is not two groups
    assert len(outliers) * BIMODAL_TAIL > 2 and bimodal(outliers) is None
    assert bimodal([1.0, 2.0, 3.0]) is None  # too few calls for two groups


def test_predecessor_shift_counts_when_apart_and_big_enough() -> None:
    row = {"baseline_after_self": [10.0, 9.9, 10.1], "baseline_after_other": [10.5, 10.4, 10.6]}
    assert predecessor_shift(row, "baseline", LIMIT) == pytest.approx(0.05)
    overlapping = {"baseline_after_self": [10.0, 9.0, 11.0], "baseline_after_other": [10.5, 9.5, 11.5]}
    assert predecessor_shift(overlapping, "baseline", LIMIT) is None  # intervals overlap
    small = {"baseline_after_self": [10.0, 9.99, 10.01], "baseline_after_other": [10.05, 10.04, 10.06]}
    assert predecessor_shift(small, "baseline", LIMIT) is None  # 0.5% ≤ half the limit
    assert predecessor_shift({}, "candidate", LIMIT) is None


def test_drift_needs_more_than_the_limit_and_the_noise() -> None:
    assert drift({"candidate_captures_us": [10.0, 10.5, 10.1], "noise": 0.005}, "candidate", LIMIT) == pytest.approx(
        0.05
    )
    assert drift({"candidate_captures_us": [10.0, 10.1], "noise": 0.0}, "candidate", LIMIT) is None  # 1% < limit
    assert drift({"candidate_captures_us": [10.0, 10.5], "noise": 0.02}, "candidate", LIMIT) is None  # < 3 × noise
    assert drift({"candidate_captures_us": [10.0, None]}, "candidate", LIMIT) is None


def test_host_bound_refusal_names_the_worst_capture() -> None:
    row = {"calls_captures": [100, 100], "host_bound_baseline": [10, 80], "host_bound_candidate": [0, 0]}
    names = {"baseline": "fa2", "candidate": "fa3"}
    assert HOST_SHARE < 0.8
    assert host_bound_refusal(row, names) == "host-bound: 80 / 100 fa2 calls in capture 2"
    assert host_bound_refusal({**row, "host_bound_baseline": [0, 0]}, names) is None


def test_cause_kinds_in_order() -> None:
    row = {
        "clock_gate": "refused", "arms_gate": "pass", "parity_gate": None,
        "calls_captures": [100], "host_bound_baseline": [90], "host_bound_candidate": [0],
        "candidate_captures_us": [10.0, 11.0], "noise": 0.001,
        "baseline_modes": [10.0, 12.0, 0.3],
    }  # fmt: skip
    assert cause_kinds(row, LIMIT) == ["clock", "host-bound", "drift", "bimodal"]
    assert [k for k in KINDS if k in cause_kinds(row, LIMIT)] == cause_kinds(row, LIMIT)
    assert cause_kinds({"hold_timeouts": 2}, LIMIT) == ["host-bound"]  # a hold that timed out is host-bound too
    assert cause_kinds({}, LIMIT) == [] and row_values({"x": None}, "x") == () and row_values({}, "y") == ()


def capture(**holds: SimpleNamespace) -> SimpleNamespace:
    return SimpleNamespace(runner=SimpleNamespace(shape=lambda s: SimpleNamespace(hold=holds[s])))


def test_hold_numbers_over_the_captures() -> None:
    held = [capture(s=SimpleNamespace(groups=4, timeouts=1, gpu_wait_us=w)) for w in (2.0, 4.0, float("nan"))]
    assert hold_numbers(held, "s") == (3, 3.0)  # the NaN wait is left out of the median
    assert hold_numbers([capture(s=SimpleNamespace(groups=0, timeouts=0, gpu_wait_us=None))], "s") == (None, None)
