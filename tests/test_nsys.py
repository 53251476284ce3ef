"""The export cache of :mod:`traceattr.trace.nsys`: a ``.nsys-rep`` pays its Arrow export once.

nsys is a stand-in that copies a prepared Arrow export (the loader's tables of a fixture) and logs each
call, so the tests count exports on CPU.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
from pathlib import Path

import polars as pl
import pytest

from tests.helpers import raw_report, run
from traceattr.trace import nsys
from traceattr.trace import schema as S
from traceattr.trace.loader import load_trace

NAME = "h200_traceattr_sweep"  # backends and shapes in its names: compare and report have verdicts to give


@pytest.fixture(scope="module")
def arrow(exports: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture's tables that the loader reads, one Arrow stream each, as ``nsys export --type arrowdir``."""
    folder = tmp_path_factory.mktemp("arrow") / NAME
    folder.mkdir()
    con = sqlite3.connect(f"{exports[NAME].resolve().as_uri()}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for table in (t for t in S.LOADER_TABLES if t in tables):
            frame = pl.read_database(f'SELECT * FROM "{table}" ORDER BY rowid', con, infer_schema_length=None)
            frame.write_ipc_stream(folder / f"{table}{nsys.ARROW_SUFFIX}")
    finally:
        con.close()
    return folder


def _fake_nsys(tmp_path: Path, arrow: Path) -> tuple[Path, Path]:
    """An ``nsys`` whose ``export --type arrowdir`` copies *arrow* to its ``--output``; it logs each call."""
    log, script = tmp_path / "nsys.log", tmp_path / "nsys"
    script.write_text(
        f"#!{sys.executable}\nimport shutil, sys\n"
        f"open({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        f"shutil.copytree({str(arrow)!r}, sys.argv[sys.argv.index('--output') + 1])\n"
    )
    script.chmod(0o755)
    return script, log


@pytest.fixture
def stand_in(
    exports: dict[str, Path], arrow: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Path, Path]:
    """(nsys stand-in, its call log, the cache folder), the environment pointing at both."""
    fake, log = _fake_nsys(tmp_path, arrow)
    cache = tmp_path / "cache"
    monkeypatch.setenv("TRACEATTR_NSYS", str(fake))
    monkeypatch.setenv(nsys.EXPORT_CACHE_ENV, str(cache))
    monkeypatch.delenv(nsys.EXPORT_CACHE_MB_ENV, raising=False)
    return fake, log, cache


def _exports(log: Path) -> int:
    return log.read_text().count("\n") if log.exists() else 0


def test_later_reads_reuse_the_export(stand_in: tuple[Path, Path, Path], tmp_path: Path) -> None:
    _, log, cache = stand_in
    rep = raw_report(tmp_path / "r")
    first = load_trace(rep)
    second = load_trace(rep)
    assert _exports(log) == 1
    assert first.gpu_ops.equals(second.gpu_ops) and second.meta.path == rep
    assert sorted(p.name for p in rep.parent.iterdir()) == ["x.nsys-rep"]  # nothing beside the report
    (entry,) = cache.iterdir()
    assert nsys.is_arrow_export(entry) and entry.name.startswith("x-")
    # the report changed (a new capture at the same path): its old export is not reused
    os.utime(rep, ns=(rep.stat().st_atime_ns, rep.stat().st_mtime_ns + 10**9))
    load_trace(rep)
    assert _exports(log) == 2 and len(list(cache.iterdir())) == 2


def test_the_cache_can_be_turned_off(
    stand_in: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, log, cache = stand_in
    monkeypatch.setenv(nsys.EXPORT_CACHE_ENV, "off")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    rep = raw_report(tmp_path / "r")
    load_trace(rep)
    load_trace(rep)
    assert _exports(log) == 2 and not cache.exists() and list(scratch.iterdir()) == []


def test_the_cache_keeps_to_its_bound(
    stand_in: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, log, cache = stand_in
    monkeypatch.setenv(nsys.EXPORT_CACHE_MB_ENV, "0")
    reports = [raw_report(tmp_path / f"r{i}") for i in range(3)]
    load_trace(reports[0])
    load_trace(reports[1])
    assert len(list(cache.iterdir())) == 2  # used within the last minutes: another command may be reading it
    monkeypatch.setattr(nsys, "_IN_USE_S", 0.0)
    load_trace(reports[2])
    (kept,) = cache.iterdir()  # the one just made stays, whatever the bound
    load_trace(reports[2])
    assert _exports(log) == 3 and list(cache.iterdir()) == [kept]
    monkeypatch.setenv(nsys.EXPORT_CACHE_MB_ENV, "lots")
    with pytest.raises(Exception, match="TRACEATTR_EXPORT_CACHE_MB='lots': expected a size in MB"):
        nsys.export_cache_bytes()


def test_concurrent_reads_share_one_whole_export(stand_in: tuple[Path, Path, Path], tmp_path: Path) -> None:
    _, log, cache = stand_in
    rep = raw_report(tmp_path / "r")
    traces: list[object] = []
    threads = [threading.Thread(target=lambda: traces.append(load_trace(rep).gpu_ops.height)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(traces) == 3 and len(set(traces)) == 1
    (entry,) = cache.iterdir()  # one entry, no partial folder left behind
    assert nsys.is_arrow_export(entry)
    load_trace(rep)
    assert 1 <= _exports(log) <= 3


@pytest.mark.slow
def test_attribute_compare_report_export_once(stand_in: tuple[Path, Path, Path], tmp_path: Path) -> None:
    fake, log, cache = stand_in
    env = {"TRACEATTR_NSYS": str(fake), nsys.EXPORT_CACHE_ENV: str(cache)}
    rep = raw_report(tmp_path / "r")
    for argv in (
        ["attribute", str(rep), "--out", str(tmp_path / "a")],
        ["compare", str(rep)],
        ["report", str(rep), "-o", str(tmp_path / "report.html")],
    ):
        done = run(*argv, env=env)
        assert done.returncode == 0, done.stderr
    assert _exports(log) == 1
    assert sorted(p.name for p in rep.parent.iterdir()) == ["x.nsys-rep"]


def test_report_of_a_report_exports_once_without_the_cache(stand_in: tuple[Path, Path, Path], tmp_path: Path) -> None:
    # report reads the calls its timeline draws again only from an SQLite export; a report's temporary export
    # is not read a second time instead (with the cache off, that was a second nsys export)
    fake, log, _ = stand_in
    rep = raw_report(tmp_path / "r")
    done = run("report", str(rep), "-o", str(tmp_path / "report.html"),
               env={"TRACEATTR_NSYS": str(fake), nsys.EXPORT_CACHE_ENV: "off"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _exports(log) == 1
