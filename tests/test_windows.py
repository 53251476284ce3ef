"""Attributing window after window gives the whole trace's answer, frame for frame."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from polars.testing import assert_frame_equal

from tests.helpers import FIXTURES, cli
from tests.synth.random_traces import traces, write
from traceattr.attribution import engine
from traceattr.attribution.engine import Attributing
from traceattr.attribution.roles import RoleRules
from traceattr.attribution.selection import RangeFilter
from traceattr.attribution.windows import cuts
from traceattr.trace.loader import Trace, load_trace


def _with_windows(ops: int | None, trace: Trace, threads: int = 1, **kw: object) -> tuple[engine.Attribution, int]:
    saved = engine.WINDOW_OPS, engine.WINDOWS_FROM, engine.WINDOW_THREADS
    engine.WINDOW_OPS, engine.WINDOWS_FROM, engine.WINDOW_THREADS = ops, 0, threads
    try:
        run = Attributing(trace, **kw)  # type: ignore[arg-type]
        count = len(run.windows)
        att = run.result(pl.concat(list(run.range_rows())))
    finally:
        engine.WINDOW_OPS, engine.WINDOWS_FROM, engine.WINDOW_THREADS = saved
    return att, count


def _same(trace: Trace, ops: int, threads: int = 1, **kw: object) -> int:
    whole, one = _with_windows(None, trace, **kw)
    assert one == 1
    parts, count = _with_windows(ops, trace, threads, **kw)
    assert_frame_equal(parts.ranges, whole.ranges)
    assert_frame_equal(parts.placement, whole.placement)
    assert_frame_equal(parts.ops, whole.ops)
    assert parts.notes == whole.notes
    return count


@pytest.fixture(scope="module")
def loaded(exports: dict[str, Path]) -> Iterator[dict[str, Trace]]:
    yield {name: load_trace(exports[name]) for name in FIXTURES}


@pytest.mark.slow
@pytest.mark.parametrize("threads", [1, 3], ids=["one-thread", "side-by-side"])
@pytest.mark.parametrize("mode", ["nsys", "innermost"])
def test_real_exports_in_windows_equal_whole(
    loaded: dict[str, Trace], mode: str, threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # windows side by side on any machine (the engine takes no more threads than CPUs)
    monkeypatch.setattr(engine, "usable_cpus", lambda: 8)
    # about 12 windows each (cuts permitting): enough to cross every kind of boundary, few enough to stay quick
    split = {
        name: _same(trace, max(1, trace.gpu_ops.height // 12), threads, mode=mode) for name, trace in loaded.items()
    }
    # the test must reach windows: most real exports divide (traces with one enclosing range do not)
    assert sum(count > 1 for count in split.values()) >= len(split) // 2, split


@pytest.mark.slow
def test_windows_of_a_selection(loaded: dict[str, Trace]) -> None:
    trace = loaded["h200_traceattr_sweep"]
    # a selection attributes every range (it filters rows, not facts): windows as without one, range rules or not
    assert _same(trace, 3, select=RangeFilter(match="traceattr:")) > 1
    assert _same(trace, 3, select=RangeFilter(match="traceattr:"), rules=_no_range_rules()) > 1


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=traces())
def test_random_traces_in_windows_equal_whole(tmp_path: Path, data: tuple[list, list, list]) -> None:
    path = tmp_path / "t.sqlite"
    write(path, *data)
    trace = load_trace(path)
    for mode in ("nsys", "innermost"):
        _same(trace, 1, mode=mode)
    _same(trace, 1, 2, mode="nsys")  # two at a time, where the CPUs allow


def test_no_window_cuts_a_range() -> None:
    ranges = pl.DataFrame(
        {"start": [0, 1, 5, 5, 9, 12, 20], "end": [3, 2, 6, 11, 10, None, 25]},
        schema={"start": pl.Int64, "end": pl.Int64},
    )
    launches = pl.Series([0, 1, 5, 6, 9, 12, 13, 20, 21], dtype=pl.Int64)
    rows = cuts(ranges, launches, 1)
    # 5 follows [0, 3] and [1, 2]; 9 is inside [5, 11]; 12 follows everything before it, but opens a range
    # never closed: nothing after it is a cut
    assert rows == [0, 2, 5]
    starts = ranges["start"].to_list()
    ends = ranges["end"].fill_null(1 << 62).to_list()
    for cut in rows[1:]:
        assert all(ends[i] < starts[cut] for i in range(cut))


def _no_range_rules() -> RoleRules:
    return RoleRules(tuple(rule for rule in RoleRules.default().rules if rule.range is None))


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_attribute_out_streams_windows_to_the_same_bytes(
    exports: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fmt: str,
) -> None:
    trace = exports["h200_traceattr_sweep"]
    written = {}
    monkeypatch.setattr(engine, "usable_cpus", lambda: 8)
    for name, ops in (("whole", None), ("windows", 3)):
        monkeypatch.setattr(engine, "WINDOW_OPS", ops)
        monkeypatch.setattr(engine, "WINDOWS_FROM", 0)
        rc, _, err = cli(capsys, "attribute", trace, "--out", tmp_path / name, "--format", fmt)
        assert rc == 0, err
        written[name] = {f: (tmp_path / name / f"{f}.{fmt}").read_bytes() for f in ("ranges", "kernels")}
    assert written["windows"] == written["whole"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["nsys", "innermost"])
def test_a_reduced_run_keeps_the_rows_and_notes_without_every_placement(
    loaded: dict[str, Trace], mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """keep_placement=False (compare reduces each window to its calls): the same range rows and notes, and of the
    placement only the ops in no range (the buckets' rows are made of them)."""
    monkeypatch.setattr(engine, "usable_cpus", lambda: 8)
    for trace in loaded.values():
        whole, _ = _with_windows(None, trace, mode=mode)
        parts, _ = _with_windows(max(1, trace.gpu_ops.height // 12), trace, 2, mode=mode, keep_placement=False)
        assert_frame_equal(parts.ranges, whole.ranges)
        assert_frame_equal(parts.placement, whole.placement.filter(pl.col("range_id").is_null()))
        assert parts.notes == whole.notes


def test_a_selection_keeps_every_placement(loaded: dict[str, Trace]) -> None:
    with pytest.raises(ValueError, match="keep_placement"):
        Attributing(loaded["h200_torch_tiny"], select=RangeFilter(match="x"), keep_placement=False)
