"""nsys mode's subtree projection (no op × range pairs) equals the pair path it replaces.

Laminar threads are projected from preorder subtrees (engine._subtree_metrics);
with ``_SUBTREES`` off every range goes through the (op, range) pair table. Both
must give the same range table, column for column, on random forests (nested
push/pop ranges, start/end ranges crossing them, several threads, processes and
streams, overlapping ops) and on every real export.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import traceattr.attribution.engine as engine
from tests.helpers import FIXTURES
from tests.synth.random_traces import Call, Op, Rng, distinct, traces, write
from traceattr.attribution.engine import attribute
from traceattr.trace.loader import load_trace


def _both(path: Path, monkeypatch: pytest.MonkeyPatch, mode: str = "nsys") -> tuple:
    trace = load_trace(path)
    fast = attribute(trace, mode=mode)  # type: ignore[arg-type]
    with monkeypatch.context() as m:
        m.setattr(engine, "_SUBTREES", False)
        pairs = attribute(trace, mode=mode)  # type: ignore[arg-type]
    return fast, pairs


def _single_rows(data: tuple[list[Rng], list[Call], list[Op]]) -> tuple[list[Rng], list[Call], list[Op]]:
    """Calls logged once: a call logged twice takes the pair path by design."""
    ranges, calls, ops = data
    return ranges, [dataclasses.replace(c, duplicated=False) for c in calls], ops


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=traces().map(_single_rows))
def test_subtrees_equal_pairs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: tuple) -> None:
    path = tmp_path / "t.sqlite"
    path.unlink(missing_ok=True)
    write(path, *data)
    calls = []
    with monkeypatch.context() as m:  # the subtree path must have run, not fallen back to pairs
        m.setattr(engine, "_subtree_metrics", lambda *a: calls.append(1) or _subtree_metrics(*a))
        fast, pairs = _both(path, monkeypatch)
    assert calls == [1]
    assert_frame_equal(fast.ranges, pairs.ranges)
    assert_frame_equal(fast.ops, pairs.ops)


_subtree_metrics = engine._subtree_metrics


def _strictly_nested(draw: st.DrawFn, tid: int, lo: int, hi: int, depth: int) -> list[Rng]:
    """Push/pop ranges whose siblings never touch: every thread stays laminar (the subtree path)."""
    out: list[Rng] = []
    t = lo
    for _ in range(draw(st.integers(1, 3)) if depth > 0 else 0):
        if t > hi:
            break
        s = draw(st.integers(t, hi))
        e = draw(st.integers(s, hi))
        out.append(Rng(tid, s, e, "PushPop"))
        out += _strictly_nested(draw, tid, s, e, depth - 1)
        t = e + 1
    return out


@st.composite
def laminar_traces(draw: st.DrawFn) -> tuple[list[Rng], list[Call], list[Op]]:
    """Deeper laminar forests with many overlapping ops on two streams and two processes."""
    threads = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3, unique=True))
    ranges = [r for tid in threads for r in _strictly_nested(draw, tid, 0, 80, depth=4)]
    calls: list[Call] = []
    ops: list[Op] = []
    corr = {1: 0, 2: 0}
    for _ in range(draw(st.integers(1, 25))):
        pid, tid, s = draw(st.sampled_from([1, 1, 2])), draw(st.sampled_from(threads)), draw(st.integers(0, 80))
        corr[pid] += 1
        calls.append(Call(pid, tid, s, s + draw(st.integers(0, 3)), corr[pid], False))
        for _ in range(draw(st.integers(1, 3))):
            g = draw(st.integers(0, 100))
            ops.append(
                Op(pid, corr[pid], g, g + draw(st.integers(0, 20)), draw(st.integers(7, 8)), draw(st.integers(0, 2)))
            )
    return ranges, calls, distinct(ops)


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=laminar_traces())
def test_subtrees_equal_pairs_on_laminar_forests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: tuple) -> None:
    path = tmp_path / "t.sqlite"
    path.unlink(missing_ok=True)
    write(path, *data)
    fast, pairs = _both(path, monkeypatch)
    assert_frame_equal(fast.ranges, pairs.ranges)
    assert_frame_equal(fast.ops, pairs.ops)


@pytest.mark.parametrize("mode", ["nsys", "innermost"])
@pytest.mark.parametrize("name", FIXTURES)
def test_subtrees_equal_pairs_on_real_exports(
    exports: dict[str, Path], monkeypatch: pytest.MonkeyPatch, name: str, mode: str
) -> None:
    fast, pairs = _both(exports[name], monkeypatch, mode)
    assert_frame_equal(fast.ranges, pairs.ranges)
