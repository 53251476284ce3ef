"""traceattr.analysis.segments: a family's dispatch along ctx, built from measured points (the one builder the
decision and the dispatch table's leave-one-out share)."""

from __future__ import annotations

import math

import pytest

from traceattr.analysis.segments import Segment, ShapePoint, build_segments, lookup


def point(ctx: int, good: str, **median_us: float) -> ShapePoint:
    return ShapePoint(ctx, f"q1_ctx{ctx}", median_us, frozenset(good.split()))


def test_fastest_and_regret() -> None:
    p = point(1024, "fa3", fa2=12.0, fa3=10.0, flashmla=10.0)
    assert p.fastest == "fa3"  # a tie of medians goes to the name first in order
    assert p.regret("fa2") == pytest.approx(0.2) and p.regret("fa3") == 0.0
    assert p.regret("flashinfer") is None and p.regret(None) is None


def test_one_backend_good_everywhere_is_one_unbounded_segment() -> None:
    pts = [point(c, "fa3", fa2=2.0, fa3=1.0) for c in (1024, 4096, 16384)]
    assert build_segments(pts) == [Segment(None, None, "fa3")]


def test_a_change_of_winner_cuts_where_the_medians_cross() -> None:
    # fa3 is 2x faster at 1k, fa2 2x faster at 4k: log(fa3/fa2) goes from -log 2 to +log 2, so it crosses zero
    # halfway in log ctx, at the geometric mean 2048
    pts = [point(4096, "fa2", fa2=1.0, fa3=2.0), point(1024, "fa3", fa2=2.0, fa3=1.0)]  # any order
    assert build_segments(pts) == [Segment(None, 2048, "fa3"), Segment(2048, None, "fa2", (1024, 4096))]
    # a crossing nearer the point where the two are closer: fa3 1.5x faster at 1k, 3x slower at 4k
    lopsided = [point(1024, "fa3", fa2=1.5, fa3=1.0), point(4096, "fa2", fa2=1.0, fa3=3.0)]
    cut = build_segments(lopsided)[0].ctx_to
    want = math.exp(math.log(1024) + math.log(1.5) / (math.log(1.5) + math.log(3)) * math.log(4))
    assert cut == round(want) and 1024 < cut < 2048


def test_without_a_crossing_the_cut_is_the_geometric_mean() -> None:
    # fa3 faster at both ends, but only fa2 good at 4k (fa3 unmeasured there): no crossing to interpolate
    pts = [point(1024, "fa3", fa2=2.0, fa3=1.0), point(4096, "fa2", fa2=1.0)]
    assert build_segments(pts)[0].ctx_to == 2048


def test_a_tie_keeps_the_current_backend_and_switches_as_rarely_as_possible() -> None:
    # at 1k both are good; fa2 stays good at 2k and 4k, fa3 does not: start on fa2 and never switch
    pts = [point(1024, "fa2 fa3", fa2=1.01, fa3=1.0), point(2048, "fa2", fa2=1.0, fa3=1.2),
           point(4096, "fa2 fa3", fa2=1.0, fa3=1.0)]  # fmt: skip
    assert build_segments(pts) == [Segment(None, None, "fa2")]


def test_lookup_bounds_are_from_inclusive_to_exclusive() -> None:
    segs = [Segment(None, 2048, "fa3"), Segment(2048, 8192, "fa2"), Segment(8192, None, "flashmla")]
    assert [lookup(segs, c) for c in (1, 2047, 2048, 8191, 8192, 1e9)] == ["fa3", "fa3", "fa2", "fa2", "flashmla",
                                                                          "flashmla"]  # fmt: skip
    assert lookup([Segment(2048, None, "fa2")], 1024) is None and build_segments([]) == []
