"""traceattr.analysis.calls: the per-call table and which shapes it can compare."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from polars.testing import assert_frame_equal

from tests.helpers import FIXTURES
from tests.synth.random_traces import traces, write
from traceattr.analysis.calls import calls, comparable_shapes, reduced_calls
from traceattr.attribution import engine
from traceattr.attribution.calltime import subtrees
from traceattr.attribution.engine import Attribution, RangeFilter, attribute
from traceattr.core.errors import TraceattrError
from traceattr.trace.loader import Trace, load_trace


def test_comparable_shapes() -> None:
    calls = pl.DataFrame({"shape": ["a", "a", "b", "b", None, None], "backend": ["x", "y", "x", "x", "x", "y"]})
    assert comparable_shapes(calls) == ["a"]


# -- the call table made window by window (reduced_calls) is the whole attribution's (calls) ----------------
def _reduced(trace: Trace, window: int | None, **kw: Any) -> tuple[Attribution, pl.DataFrame]:
    saved = engine.WINDOW_OPS, engine.WINDOWS_FROM, engine.WINDOW_THREADS
    engine.WINDOW_OPS, engine.WINDOWS_FROM, engine.WINDOW_THREADS = window, 0, 2
    try:
        return reduced_calls(trace, **kw)
    finally:
        engine.WINDOW_OPS, engine.WINDOWS_FROM, engine.WINDOW_THREADS = saved


def _same_calls(trace: Trace, window: int | None, mode: str = "nsys", group: str | None = None) -> pl.DataFrame:
    whole = calls(attribute(trace, mode), group)  # type: ignore[arg-type]
    _, reduced = _reduced(trace, window, mode=mode, group=group)
    assert_frame_equal(reduced, whole)
    return whole


@pytest.fixture(scope="module")
def loaded(exports: dict[str, Path]) -> dict[str, Trace]:
    return {name: load_trace(exports[name]) for name in FIXTURES}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["nsys", "innermost"])
def test_reduced_calls_equal_the_whole_attributions(
    loaded: dict[str, Trace], mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine, "usable_cpus", lambda: 8)  # two windows side by side on any machine
    found = {
        name: _same_calls(trace, max(1, trace.gpu_ops.height // 12), mode).height for name, trace in loaded.items()
    }
    assert sum(n > 0 for n in found.values()) >= len(found) // 2, found  # calls by name and top-level series


def test_reduced_calls_by_a_given_group_and_its_errors(loaded: dict[str, Trace]) -> None:
    trace = loaded["h200_traceattr_sweep"]
    assert _same_calls(trace, 40, group="traceattr").height == 200
    # a regex that reads the name nsys shows, not the message: the second way, in every window
    assert _same_calls(trace, 40, group=r"^traceattr:backend=(?P<backend>\S+) shape=(?P<shape>\S+)").height == 200
    with pytest.raises(TraceattrError) as whole:
        calls(attribute(trace), r"^nothing(?P<backend>x)(?P<shape>y)$")
    with pytest.raises(TraceattrError) as windows:
        _reduced(trace, 40, group=r"^nothing(?P<backend>x)(?P<shape>y)$")
    assert str(windows.value) == str(whole.value)


def test_reduced_calls_one_window_at_a_time(loaded: dict[str, Trace], monkeypatch: pytest.MonkeyPatch) -> None:
    # compare's way (threads=1): the windows in turn on this thread give the table two side by side give
    monkeypatch.setattr(engine, "usable_cpus", lambda: 8)
    trace = loaded["h200_traceattr_sweep"]
    _, side_by_side = _reduced(trace, 40, group="traceattr")
    _, in_turn = _reduced(trace, 40, group="traceattr", threads=1)
    assert_frame_equal(in_turn, side_by_side)
    assert in_turn.height == 200


def test_reduced_calls_keep_what_is_asked(loaded: dict[str, Trace]) -> None:
    trace = loaded["h200_traceattr_sweep"]
    att, table = _reduced(trace, 40, keep=("range_id", "name"), ops=True)
    whole = attribute(trace)
    # the kept columns of the ranges in the calls' subtrees (a timeline draws those), not of every range
    assert att.ranges.columns == ["range_id", "name"]
    subtree = subtrees(whole.ranges, table["call_id"])["range_id"]
    assert sorted(att.ranges["range_id"]) == sorted(subtree) and len(subtree) < whole.ranges.height
    assert_frame_equal(att.placement, whole.placement)  # a timeline's ops: ops_at reads them
    at = whole.placement.filter(pl.col("range_id") == table["call_id"][0])["op_id"]
    assert_frame_equal(att.ops_at(at), whole.ops.filter(pl.col("op_id").is_in(at.implode())))
    bare, _ = _reduced(trace, 40)
    assert bare.ranges.width == 0 and bare.placement.height == 0 and bare.trace.gpu_ops.height == 0
    assert bare.notes == whole.notes and bare.trace.devices.equals(whole.trace.devices)
    # a selection changes what a call owns once every window is read: the whole attribution, as calls() reads it
    chosen, table = _reduced(trace, 40, select=RangeFilter(match="fa3"))
    assert chosen.selected and set(table["backend"]) == {"fa3", "fa3-per-token"}


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=traces())
def test_random_traces_reduced_calls_equal_the_whole(tmp_path: Path, data: tuple[list, list, list]) -> None:
    path = tmp_path / "t.sqlite"
    write(path, *data)
    trace = load_trace(path)
    for mode in ("nsys", "innermost"):
        try:
            whole = calls(attribute(trace, mode), None)  # type: ignore[arg-type]
        except TraceattrError as err:  # no call has a duration: the same one line, window by window
            with pytest.raises(TraceattrError) as reduced:
                _reduced(trace, 1, mode=mode)
            assert str(reduced.value) == str(err)
            continue
        assert_frame_equal(_reduced(trace, 1, mode=mode)[1], whole)


# -- the timeline's calls read again (calls_to_read_again) draw what the held rows drew ---------------------------
def _timeline(path: Path, again: bool, window: int) -> Any:
    from traceattr.analysis.calls import calls_to_read_again
    from traceattr.attribution.columns import TIMELINE_COLUMNS
    from traceattr.present.report.data import collect
    from traceattr.trace.loader import row_ids

    saved = engine.WINDOW_OPS, engine.WINDOWS_FROM
    engine.WINDOW_OPS, engine.WINDOWS_FROM = window, 0
    try:
        if not again:
            att, table = reduced_calls(load_trace(path), keep=TIMELINE_COLUMNS, ops=True)
            return collect(att, calls=table).timeline
        trace = load_trace(path, launch_config=False)  # the launch configuration comes with the calls read again
        rows = row_ids(path, trace)
        assert rows is not None, path
        att, table, reread = calls_to_read_again(trace, rows)
        del trace
        assert att.placement.height == att.trace.gpu_ops.height == 0  # nothing per op held
        return collect(att, calls=table, again=reread).timeline
    finally:
        engine.WINDOW_OPS, engine.WINDOWS_FROM = saved


@pytest.mark.slow
@pytest.mark.parametrize("name", ["h200_traceattr_sweep", "h200_flashinfer_mla", "nsysai_mfu_2gpu_after"])
def test_calls_read_again_draw_the_timeline_the_held_rows_draw(exports: dict[str, Path], name: str) -> None:
    path = exports[name]
    window = max(1, load_trace(path).gpu_ops.height // 12)
    held, again = _timeline(path, False, window), _timeline(path, True, window)
    assert again.views == held.views
    assert (again.calls_total, again.calls_shown) == (held.calls_total, held.calls_shown)
    assert_frame_equal(again.ops, held.ops)
    assert_frame_equal(again.ranges, held.ranges)
    assert held.ops.height and held.ranges.height


def test_rows_not_found_again_are_not_read_again(exports: dict[str, Path]) -> None:
    from traceattr.trace.loader import row_ids

    path = exports["pipit_saxpy_mpi_a100"]  # runtime calls logged twice: rows the load merges
    assert row_ids(path, load_trace(path, launch_config=False)) is None
