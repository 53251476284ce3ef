"""traceattr.analysis.calls: the per-call table and which shapes it can compare."""

from __future__ import annotations

import polars as pl

from traceattr.analysis.calls import comparable_shapes


def test_comparable_shapes() -> None:
    calls = pl.DataFrame({"shape": ["a", "a", "b", "b", None, None], "backend": ["x", "y", "x", "x", "x", "y"]})
    assert comparable_shapes(calls) == ["a"]
