"""A rowid is a value in the file: whatever it holds, reading does work in proportion to the rows
(issue 19, class 1), and the fallback engine says what it is.

Built at test time from a fixture copy: one row of a table moved to rowid 2**40, 2**62, -1 or -2**62
(at the table's end, or its start for negative ones, so the rows keep their order), then the copy
must read in seconds and attribute exactly as the unmodified file does.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
import warnings
from pathlib import Path

import polars as pl
import pytest

from traceattr.attribution.engine import attribute
from traceattr.core.errors import TraceNote
from traceattr.trace import sqlite_source
from traceattr.trace.loader import load_trace
from traceattr.trace.sqlite_source import ROWS_PER_CHUNK, SqliteSource, reading_threads

FIXTURE = "h200_flashinfer_mla"
KERNEL, RUNTIME, NVTX = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"
HOSTILE = [(KERNEL, 2**40), (KERNEL, 2**62), (KERNEL, -(2**62)), (RUNTIME, 2**62), (RUNTIME, -1)]


def _moved(source: Path, folder: Path, table: str, rowid: int, name: str | None = None) -> Path:
    """A copy of *source* whose last row of *table* (first, for a negative *rowid*) has that rowid."""
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / (name or source.name)
    shutil.copyfile(source, copy)
    copy.chmod(0o644)
    with sqlite3.connect(copy) as db:
        edge = "max" if rowid > 0 else "min"
        db.execute(f'UPDATE "{table}" SET rowid = ? WHERE rowid = (SELECT {edge}(rowid) FROM "{table}")', (rowid,))
    return copy


def _attributed(path: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    att = attribute(load_trace(path))
    return att.ranges, att.ops


@pytest.fixture(scope="module")
def unmodified(exports: dict[str, Path]) -> tuple[pl.DataFrame, pl.DataFrame]:
    return _attributed(exports[FIXTURE])


@pytest.mark.parametrize(("table", "rowid"), HOSTILE)
def test_a_far_rowid_reads_in_seconds_with_the_same_result(
    exports: dict[str, Path], unmodified: tuple[pl.DataFrame, pl.DataFrame], tmp_path: Path, table: str, rowid: int
) -> None:
    copy = _moved(exports[FIXTURE], tmp_path, table, rowid)
    started = time.perf_counter()
    ranges, ops = _attributed(copy)
    assert time.perf_counter() - started < 30
    assert ranges.equals(unmodified[0])
    assert ops.equals(unmodified[1])


def test_a_far_nvtx_rowid_changes_only_that_range_id(
    exports: dict[str, Path], unmodified: tuple[pl.DataFrame, pl.DataFrame], tmp_path: Path
) -> None:
    copy = _moved(exports[FIXTURE], tmp_path, NVTX, 2**62)  # NVTX rowids are the range ids
    ranges, ops = _attributed(copy)
    ids = [c for c in ranges.columns if c.endswith("_id")]
    assert ranges.drop(ids).equals(unmodified[0].drop(ids))
    assert ops.drop([c for c in ops.columns if c.endswith("_id")]).equals(
        unmodified[1].drop([c for c in ops.columns if c.endswith("_id")])
    )


@pytest.mark.parametrize("engine", ["adbc", "sqlite3"])
def test_chunks_follow_the_rows_not_the_rowid_span(exports: dict[str, Path], tmp_path: Path, engine: str) -> None:
    copy = _moved(exports[FIXTURE], tmp_path, KERNEL, 2**62)
    with SqliteSource(copy, engine) as src:
        rows = src.scalar_rows(f'SELECT count(*) FROM "{KERNEL}"', "counting")[0][0]
        for per_chunk in (ROWS_PER_CHUNK, 7):
            chunks = src.row_chunks(KERNEL, per_chunk)
            assert len(chunks) <= rows // per_chunk + 1
            counted = [
                src.scalar_rows(f'SELECT count(*) FROM "{KERNEL}" WHERE {c}', "counting")[0][0] for c, _ in chunks
            ]
            assert sum(counted) == rows  # every row in exactly one chunk
            assert all(n <= per_chunk for n in counted)
            assert all(n <= bound for n, (_, bound) in zip(counted, chunks, strict=True))


@pytest.mark.slow
def test_many_reports_with_far_rowids(exports: dict[str, Path], tmp_path: Path) -> None:
    import subprocess
    import sys

    folder = tmp_path / "reports"
    for i, (table, rowid) in enumerate([(KERNEL, 2**62), (RUNTIME, -(2**62))]):
        _moved(exports[FIXTURE], folder, table, rowid, f"r{i}.sqlite")
    done = subprocess.run(
        [sys.executable, "-m", "traceattr", "attribute", str(folder), "-j", "2", "-o", str(tmp_path / "out"), "-f", "csv"],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    reports = pl.read_csv(tmp_path / "out" / "traces.csv")
    assert reports["ok"].all() and reports.height == 2


def test_the_fallback_reads_on_one_thread_and_says_so_once(
    exports: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_source, "_adbc", None)  # as if adbc-driver-sqlite were not installed
    monkeypatch.setattr(sqlite_source, "_slow_path_said", False)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        for _ in range(2):
            trace = load_trace(exports[FIXTURE])
    assert trace.meta.engine == "sqlite3"
    notes = [w for w in said if issubclass(w.category, TraceNote)]
    assert len(notes) == 1 and "sqlite3" in str(notes[0].message) and "adbc" in str(notes[0].message)
    assert reading_threads("sqlite3") == 1
    monkeypatch.setattr(sqlite_source, "usable_cpus", lambda: 16)
    assert reading_threads("adbc") == 8


def test_asked_for_sqlite3_is_no_slow_path_note(exports: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_source, "_slow_path_said", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TraceNote)
        assert load_trace(exports[FIXTURE], engine="sqlite3").meta.engine == "sqlite3"


def test_the_engine_is_in_the_manifest_and_verbose(
    exports: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from traceattr.cli import main

    shown = warnings.showwarning
    try:
        with pytest.raises(SystemExit) as exc:
            main(["--verbose", "attribute", str(exports[FIXTURE]), "-o", str(tmp_path / "out"), "-f", "csv"])
    finally:
        warnings.showwarning = shown
    err = capsys.readouterr().err
    assert exc.value.code == 0, err
    engine = json.loads((tmp_path / "out" / "attribution.json").read_text())["engine"]
    assert engine in ("adbc", "sqlite3")
    assert f"through {engine} on " in err
