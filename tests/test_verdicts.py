"""traceattr.analysis.verdicts: who wins a shape. The fastest backend is the winner only where every other one
is really slower (its ratio interval says "slower"); else the not-really-slower ones tie with it, and an arm
running the same program as another is no competitor."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from traceattr.analysis.verdicts import call_samples, same_label, shape_verdicts

# per-call spans (ns) with a little spread: 60 calls each
SPREAD = np.linspace(-0.5, 0.5, 60)


def spans(us: float) -> np.ndarray:
    return 1000 * (us + SPREAD)


def summarised(samples: dict[tuple[str, str], np.ndarray]) -> pl.DataFrame:
    return pl.DataFrame([(s, b, float(np.median(v)) / 1000) for (s, b), v in samples.items()],
                        schema={"shape": pl.String, "backend": pl.String, "median_us": pl.Float64},
                        orient="row")  # fmt: skip


def by_backend(verdicts: pl.DataFrame, shape: str) -> dict[str, dict]:
    return {r["backend"]: r for r in verdicts.filter(pl.col("shape") == shape).iter_rows(named=True)}


def test_a_winner_needs_every_other_backend_really_slower() -> None:
    samples = {("a", "fa2"): spans(13.0), ("a", "fa3"): spans(10.0), ("a", "flashmla"): spans(15.0)}
    got = by_backend(shape_verdicts(summarised(samples), samples), "a")
    assert {b: r["verdict"] for b, r in got.items()} == {"fa3": "winner", "fa2": "slower", "flashmla": "slower"}
    assert [b for b, r in got.items() if r["winner"]] == ["fa3"] and got["fa3"]["tie_pct"] is None
    assert (got["fa3"]["vs_best_low"], got["fa3"]["vs_best_high"]) == (1.0, 1.0)
    assert got["fa2"]["vs_best_low"] < 1.3 < got["fa2"]["vs_best_high"]  # the interval holds the true ratio


def test_a_backend_within_noise_makes_a_tie_and_no_winner() -> None:
    samples = {("a", "fa2"): spans(10.02), ("a", "fa3"): spans(10.0), ("a", "flashmla"): spans(14.0)}
    got = by_backend(shape_verdicts(summarised(samples), samples), "a")
    assert {b: r["verdict"] for b, r in got.items()} == {"fa3": "tie", "fa2": "tie", "flashmla": "slower"}
    assert not any(r["winner"] for r in got.values())
    tie = got["fa3"]["tie_pct"]
    assert tie is not None and 0 < tie < 5  # ±x%: how far the tied interval reaches from 1
    assert tie == pytest.approx(100 * max(abs(got["fa2"]["vs_best_low"] - 1), abs(got["fa2"]["vs_best_high"] - 1)),
                                rel=0.05)  # fmt: skip


def test_a_shape_with_one_backend_is_alone() -> None:
    samples = {("a", "fa2"): spans(13.0), ("a", "fa3"): spans(10.0)}
    summary = pl.concat([summarised(samples), pl.DataFrame({"shape": ["b"], "backend": ["fa2"], "median_us": [9.0]})])
    got = by_backend(shape_verdicts(summary, samples), "b")  # no samples needed for b: it is never compared
    assert got["fa2"]["verdict"] == "alone" and not got["fa2"]["winner"] and got["fa2"]["vs_best_low"] is None


def test_the_same_program_is_no_competitor_and_the_plainest_label_stands_for_it() -> None:
    # fa3-per-token runs fa3's program; it is a hair faster, yet fa3 stands for the program and wins
    samples = {("a", "fa2"): spans(13.0), ("a", "fa3"): spans(10.0), ("a", "fa3-per-token"): spans(9.99)}

    def twins(x: str, y: str, _shape: str) -> bool:
        return {x, y} == {"fa3", "fa3-per-token"} or x == y

    got = by_backend(shape_verdicts(summarised(samples), samples, twins), "a")
    assert {b: (r["verdict"], r["same_program_as"]) for b, r in got.items()} == {
        "fa3": ("winner", None), "fa2": ("slower", None), "fa3-per-token": ("same program", "fa3"),
    }  # fmt: skip
    # without the fact, the two tie
    plain = by_backend(shape_verdicts(summarised(samples), samples), "a")
    assert plain["fa3-per-token"]["verdict"] == "tie" and same_label("fa3", "fa3", "a")


def test_call_samples_are_the_comparable_shapes_per_backend() -> None:
    calls = pl.DataFrame({"shape": ["a", "a", "a", "b"], "backend": ["fa2", "fa3", "fa3", "fa2"],
                          "gpu_span_ns": [5, 7, None, 9]})  # fmt: skip
    got = call_samples(calls)
    assert set(got) == {("a", "fa2"), ("a", "fa3")}  # b has one backend: never compared
    assert got[("a", "fa3")].tolist() == [7.0]  # a call without a span is dropped
