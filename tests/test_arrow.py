"""nsys Arrow exports (``nsys export --type arrowdir``) load as their SQLite exports do, and an ``.nsys-rep`` is
read through one.

Most tests build the Arrow folder from a real SQLite export in tests/data, table by table in rowid order,
with the Arrow types nsys 2023.4 writes (:data:`NSYS_ARROW_TYPES`, read off its exports of real reports,
whose values and row order equal the SQLite export's); the last ones run the real nsys on a real report.
"""

from __future__ import annotations

import json
import lzma
import os
import shutil
import sqlite3
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.helpers import DATA, FIXTURES, IN_CI, raw_report, run
from traceattr.trace import schema as S
from traceattr.trace.arrow_source import ArrowSource
from traceattr.trace.loader import Trace, _graph_mode_decides, load_trace
from traceattr.trace.nsys import find_nsys

# the Arrow types of the columns the loader reads, as nsys 2023.4 writes them (other columns: inferred)
# fmt: off
_IDS = {"deviceId": pl.UInt32, "contextId": pl.UInt64, "streamId": pl.UInt64, "correlationId": pl.UInt32,
        "globalPid": pl.UInt64, "graphNodeId": pl.UInt64}
NSYS_ARROW_TYPES: dict[str, dict[str, pl.DataType]] = {
    S.STRINGS: {"id": pl.Int32, "value": pl.String},
    S.KERNEL: {**_IDS, "demangledName": pl.UInt64, "shortName": pl.UInt64, "mangledName": pl.UInt64,
               "registersPerThread": pl.UInt32, "gridX": pl.Int32, "blockX": pl.Int32,
               "staticSharedMemory": pl.Int32, "dynamicSharedMemory": pl.Int32},
    S.MEMCPY: {**_IDS, "bytes": pl.UInt64, "copyKind": pl.UInt64},
    S.MEMSET: {**_IDS, "bytes": pl.UInt64},
    S.RUNTIME: {"globalTid": pl.UInt64, "correlationId": pl.UInt32, "nameId": pl.UInt64},
    S.NVTX: {"eventType": pl.UInt32, "text": pl.String, "globalTid": pl.UInt64, "endGlobalTid": pl.UInt64,
             "textId": pl.UInt32, "domainId": pl.UInt64, "uint64Value": pl.UInt64, "int64Value": pl.Int64,
             "uint32Value": pl.UInt32, "int32Value": pl.Int32},
    S.GPU_INFO: {"id": pl.UInt32, "smCount": pl.UInt32, "l2CacheSize": pl.UInt32, "totalMemory": pl.UInt64,
                 "memoryBandwidth": pl.UInt64, "clockRate": pl.UInt32, "computeMajor": pl.UInt32},
}
# fmt: on
FRAMES = ("gpu_ops", "api", "ranges", "marks", "strings", "devices")
REPORT = DATA / "gpubootcamp_mpi_v100" / "report1.qdrep.xz"


def _column(name: str, values: list[object], dtype: pl.DataType | None) -> pl.Series:
    """*values* as nsys types the column in Arrow; a value SQLite holds that the type cannot (a REAL, text)
    leaves the column as inferred, and a negative id in an unsigned 64-bit column keeps its bits."""
    if dtype == pl.UInt64:
        values = [v % 2**64 if isinstance(v, int) and v < 0 else v for v in values]
    if dtype is not None:
        try:
            return pl.Series(name, values, dtype=dtype, strict=True)
        except (TypeError, OverflowError, pl.exceptions.PolarsError):
            pass
    return pl.Series(name, values, strict=False)


def arrow_export(sqlite: Path, folder: Path) -> Path:
    """*sqlite*'s tables that the loader reads, as nsys 2023.4's ``--type arrowdir`` writes them (it writes no
    META_DATA_CAPTURE there)."""
    folder.mkdir(parents=True)
    con = sqlite3.connect(f"{sqlite.resolve().as_uri()}?mode=ro", uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for table in (t for t in S.LOADER_TABLES if t in tables and t != S.CAPTURE_META):
            names = [r[1] for r in con.execute(f"PRAGMA table_info('{table}')")]
            rows = con.execute(f'SELECT * FROM "{table}" ORDER BY rowid').fetchall()
            types = NSYS_ARROW_TYPES.get(table, {})
            columns = [_column(c, [r[i] for r in rows], types.get(c)) for i, c in enumerate(names)]
            pl.DataFrame(columns).write_ipc_stream(folder / f"{table}.arrow")
    finally:
        con.close()
    return folder


@pytest.fixture(scope="module")
def arrow_exports(exports: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("arrow")
    return {name: arrow_export(path, root / name) for name, path in exports.items()}


def _same_frames(a: Trace, b: Trace) -> None:
    """The loader's frames of two reads of one trace: equal, value for value, with the same types."""
    for frame in FRAMES:
        assert getattr(a, frame).equals(getattr(b, frame)), frame
        assert getattr(a, frame).schema == getattr(b, frame).schema, frame


def _attributed(inputs: dict[str, Path], out: Path, fmt: str = "csv") -> dict[str, Path]:
    """``attribute INPUT --format FMT --out out/NAME`` for each named input (it must succeed): the folders."""
    outs = {}
    for how, path in inputs.items():
        outs[how] = out / how
        done = run("attribute", str(path), "--format", fmt, "--out", str(outs[how]))
        assert done.returncode == 0, done.stderr
    return outs


@pytest.mark.slow
@pytest.mark.parametrize("name", FIXTURES)
def test_arrow_export_loads_as_its_sqlite_export(
    exports: dict[str, Path], arrow_exports: dict[str, Path], name: str
) -> None:
    a, b = load_trace(exports[name]), load_trace(arrow_exports[name])
    _same_frames(a, b)
    assert (b.meta.engine, b.meta.path) == ("arrow", arrow_exports[name])
    assert (a.meta.nsys_version, a.meta.schema_version) == (b.meta.nsys_version, b.meta.schema_version)
    assert b.meta.capture == {} and b.meta.graph_trace_mode is None  # no META_DATA_CAPTURE in an Arrow export
    if a.meta.graph_trace_mode is None or not _graph_mode_decides(a.meta):  # the mode changes nothing here
        assert a.meta.notes == b.meta.notes and a.meta.graph_nodes_hidden == b.meta.graph_nodes_hidden


@pytest.mark.slow
def test_attribute_of_an_arrow_folder_is_byte_identical(
    exports: dict[str, Path], arrow_exports: dict[str, Path], tmp_path: Path
) -> None:
    for name in ("h200_torch_tiny", "nsysai_mfu_2gpu_before"):
        for fmt in ("csv", "parquet"):
            inputs = {"sqlite": exports[name], "arrow": arrow_exports[name]}
            outs = _attributed(inputs, tmp_path / f"{name}-{fmt}", fmt)
            for table in ("ranges", "kernels"):
                a, b = (outs[h] / f"{table}.{fmt}" for h in ("sqlite", "arrow"))
                if fmt == "csv":
                    assert a.read_bytes() == b.read_bytes(), (name, table)
                else:
                    assert pl.read_parquet(a).equals(pl.read_parquet(b)), (name, table)
            manifest = json.loads((outs["arrow"] / "attribution.json").read_text())
            assert manifest["engine"] == "arrow" and manifest["input"] == str(arrow_exports[name])


def _one_line(out: object, *words: str) -> None:
    assert out.returncode == 2, out.stderr  # type: ignore[attr-defined]
    lines = out.stderr.strip().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr  # type: ignore[attr-defined]
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.slow
def test_bad_arrow_exports_are_one_line(arrow_exports: dict[str, Path], tmp_path: Path) -> None:
    good = arrow_exports["h200_torch_tiny"]
    cut = shutil.copytree(good, tmp_path / "cut")
    data = (cut / f"{S.NVTX}.arrow").read_bytes()
    (cut / f"{S.NVTX}.arrow").write_bytes(data[: len(data) // 2])
    _one_line(run("attribute", str(cut)), str(cut), f"{S.NVTX}.arrow cannot be read as an Arrow stream")
    # a device id past the loader's Int32: named with its column and count, as the SQLite reader names it
    wide = shutil.copytree(good, tmp_path / "wide")
    kernels = pl.read_ipc_stream(wide / f"{S.KERNEL}.arrow")
    kernels.with_columns(pl.lit(2**32 - 1, pl.UInt32).alias("deviceId")).write_ipc_stream(wide / f"{S.KERNEL}.arrow")
    _one_line(run("attribute", str(wide)), f"reading {S.KERNEL}: device_id holds", "not a valid Int32 value")
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copyfile(good / f"{S.STRINGS}.arrow", bare / f"{S.STRINGS}.arrow")
    _one_line(run("attribute", str(bare)), "holds no CUDA trace")
    (tmp_path / "empty").mkdir()
    _one_line(run("attribute", str(tmp_path / "empty")), "without nsys exports (.sqlite, Arrow folders)")
    assert sorted(p.name for p in good.iterdir()) == sorted(p.name for p in cut.iterdir())  # inputs untouched


def test_unsigned_ids_keep_the_bits_sqlite_holds(tmp_path: Path) -> None:
    """SQLite integers are signed: an id of 2**64 - 1 there reads -1, so the Arrow reader says -1 too."""
    folder = tmp_path / "x"
    folder.mkdir()
    pl.DataFrame({"id": pl.Series([1], dtype=pl.Int32), "value": ["k"]}).write_ipc_stream(folder / f"{S.STRINGS}.arrow")
    pl.DataFrame({"start": [10], "end": [20], "globalPid": pl.Series([2**64 - 1], dtype=pl.UInt64),
                  "correlationId": pl.Series([7], dtype=pl.UInt32), "demangledName": pl.Series([1], dtype=pl.UInt64),
                  }).write_ipc_stream(folder / f"{S.KERNEL}.arrow")  # fmt: skip
    ops = load_trace(folder).gpu_ops
    assert ops["global_pid"].to_list() == [-1] and ops["correlation_id"].to_list() == [7]
    assert ArrowSource(folder).rows(S.KERNEL, ["start", "nope"], "reading") == [(10, None)]


# -- .nsys-rep through Arrow, with an nsys stand-in ------------------------------------------------


def _fake_nsys(tmp_path: Path, arrow: Path | None, sqlite: Path) -> tuple[Path, Path]:
    """An ``nsys`` that 'exports' *arrow* (a folder; None: refuses arrowdir, as an nsys before 2023 does) or
    *sqlite*, and logs each call."""
    log = tmp_path / "nsys.log"
    script = tmp_path / "nsys"
    arrowdir = f"    shutil.copytree({str(arrow)!r}, out)\n" if arrow else "    sys.exit('unknown export type')\n"
    script.write_text(
        f"#!{sys.executable}\nimport shutil, sys\n"
        f"open({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        "out = sys.argv[sys.argv.index('--output') + 1]\n"
        "if sys.argv[sys.argv.index('--type') + 1] == 'arrowdir':\n" + arrowdir +
        f"else:\n    shutil.copyfile({str(sqlite)!r}, out)\n"
    )  # fmt: skip
    script.chmod(0o755)
    return script, log


@pytest.mark.slow
def test_a_report_is_read_through_a_temporary_arrow_export(
    exports: dict[str, Path], arrow_exports: dict[str, Path], tmp_path: Path
) -> None:
    name = "h200_flashinfer_mla"
    nsys, log = _fake_nsys(tmp_path, arrow_exports[name], exports[name])
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {"TRACEATTR_NSYS": str(nsys), "TMPDIR": str(scratch)}
    rep = raw_report(tmp_path / "arrow")
    done = run("attribute", str(rep), "--format", "csv", "--out", str(tmp_path / "a"), env=env)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in rep.parent.iterdir()) == ["x.nsys-rep"] and list(scratch.iterdir()) == []
    call = log.read_text().split()
    assert call[call.index("--type") + 1] == "arrowdir"
    assert call[call.index("--tables") + 1].split(",") == [f"^{t}$" for t in S.LOADER_TABLES]
    manifest = json.loads((tmp_path / "a" / "attribution.json").read_text())
    assert (manifest["engine"], manifest["input"]) == ("arrow", str(rep))
    # the same files as through the SQLite export, which is kept beside the report
    rep2 = raw_report(tmp_path / "sqlite")
    done = run("attribute", str(rep2), "--format", "csv", "--out", str(tmp_path / "s"),
               env={**env, "TRACEATTR_REPORT_EXPORT": "sqlite"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in rep2.parent.iterdir()) == ["x.nsys-rep", "x.sqlite"]
    for table in ("ranges.csv", "kernels.csv"):
        assert (tmp_path / "a" / table).read_bytes() == (tmp_path / "s" / table).read_bytes()
    # a fresh SQLite export beside the report is read as it is: nsys is not run
    calls = log.read_text().count("\n")
    assert run("attribute", str(rep2), env=env).returncode == 0 and log.read_text().count("\n") == calls
    _one_line(run("attribute", str(rep), env={**env, "TRACEATTR_REPORT_EXPORT": "parquet"}),
              "TRACEATTR_REPORT_EXPORT='parquet'", "expected arrow or sqlite")  # fmt: skip
    assert rep.read_bytes() == b"raw capture"


@pytest.mark.slow
def test_an_nsys_without_arrow_exports_sqlite(exports: dict[str, Path], tmp_path: Path) -> None:
    nsys, log = _fake_nsys(tmp_path, None, exports["h200_torch_tiny"])
    rep = raw_report(tmp_path / "old")
    done = run(
        "attribute", str(rep), "--format", "csv", "--out", str(tmp_path / "o"), env={"TRACEATTR_NSYS": str(nsys)}
    )
    assert done.returncode == 0, done.stderr
    types = [line.split()[line.split().index("--type") + 1] for line in log.read_text().splitlines()]
    assert types == ["arrowdir", "sqlite"]
    assert sorted(p.name for p in rep.parent.iterdir()) == ["x.nsys-rep", "x.sqlite"]
    assert json.loads((tmp_path / "o" / "attribution.json").read_text())["engine"] in ("adbc", "sqlite3")


@pytest.mark.slow
def test_the_graph_mode_an_arrow_export_lacks_is_read_from_sqlite(exports: dict[str, Path], tmp_path: Path) -> None:
    """Graph launches whose kernels name no node, no whole-graph records: only the capture's mode says whether
    kernels are hidden, and the Arrow export does not hold it, so the report is exported to SQLite too."""
    sqlite = tmp_path / "graph.sqlite"
    shutil.copyfile(exports["h200_torch_tiny"], sqlite)
    sqlite.chmod(0o644)
    con = sqlite3.connect(sqlite)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table in {S.KERNEL, S.MEMCPY, S.MEMSET} & tables:  # no op names its graph node
        con.execute(f'UPDATE "{table}" SET graphNodeId = NULL')
    con.execute(f"UPDATE \"{S.CAPTURE_META}\" SET value = 'Graph' WHERE name LIKE '%CUDA_GRAPH_TRACE_OPTIONS:MODE'")
    con.commit()
    con.close()
    whole = load_trace(sqlite)
    assert whole.meta.graph_trace_mode == "graph" and whole.meta.graph_nodes_hidden and _graph_mode_decides(whole.meta)
    folder = arrow_export(sqlite, tmp_path / "graph")
    assert not load_trace(folder).meta.graph_nodes_hidden  # what the Arrow export alone would say
    nsys, log = _fake_nsys(tmp_path, folder, sqlite)
    rep = raw_report(tmp_path / "rep")
    done = run(
        "attribute", str(rep), "--format", "csv", "--out", str(tmp_path / "o"), env={"TRACEATTR_NSYS": str(nsys)}
    )
    assert done.returncode == 0, done.stderr
    notes = json.loads((tmp_path / "o" / "attribution.json").read_text())["notes"]
    assert any("--cuda-graph-trace=node" in n for n in notes)  # the note, as from the SQLite export
    assert [line.split()[2] for line in log.read_text().splitlines()] == ["arrowdir", "sqlite"]


# -- nsys 2025.3's own Arrow export ------------------------------------------------------------------
THREADS = "h200_threads_nsys2025_3"  # its arrowdir/ is what nsys 2025.3.2 wrote (text scrubbed as the export's)


@pytest.mark.slow
def test_a_real_2025_arrow_export_loads_as_its_sqlite_export(exports: dict[str, Path], tmp_path: Path) -> None:
    """Ranges on four threads (push/pop on three, a start/end range ended on another thread, one never
    closed), marks and payloads: nsys 2025.3.2's Arrow tables load as its SQLite export does, row order
    (range ids) included, and its META_DATA_CAPTURE (which 2023.4's Arrow export lacks) gives the capture."""
    folder = shutil.copytree(DATA / THREADS / "arrowdir", tmp_path / "arrowdir")
    a, b = load_trace(exports[THREADS]), load_trace(folder)
    _same_frames(a, b)
    assert b.meta.engine == "arrow" and a.meta.capture == b.meta.capture != {}
    assert a.meta.graph_trace_mode == b.meta.graph_trace_mode and a.meta.notes == b.meta.notes
    assert a.ranges["tid"].n_unique() == 4 and a.ranges.height > 200 and a.marks.height > 0
    outs = _attributed({"sqlite": exports[THREADS], "arrow": folder}, tmp_path / "out")
    for table in ("ranges.csv", "kernels.csv"):
        assert (outs["arrow"] / table).read_bytes() == (outs["sqlite"] / table).read_bytes(), table
    notes = json.loads((outs["arrow"] / "attribution.json").read_text())["notes"]
    assert "1 start/end range ended on another thread: not projected (nsys drops them too)" in notes


# -- the real nsys on a real report -----------------------------------------------------------------


@pytest.fixture(scope="module")
def real_nsys() -> Path:
    nsys = find_nsys()
    if nsys is None:
        if IN_CI:
            pytest.fail("CI must run the real-report test: no nsys found (TRACEATTR_NSYS, PATH, standard folders)")
        pytest.skip("no nsys found")
    return nsys


@pytest.mark.slow
def test_a_real_report_through_arrow_and_through_sqlite(real_nsys: Path, tmp_path: Path) -> None:
    """gpubootcamp's MPI rank report (nsys 2020.5; 2,002 kernels, 5,002 memcpys, 2,004 memsets, 1,002 ranges):
    both paths give the same files; the Arrow one leaves nothing beside the report."""
    outs = {}
    for how in ("arrow", "sqlite"):
        folder = tmp_path / how
        folder.mkdir()
        rep = folder / "report1.qdrep"
        rep.write_bytes(lzma.decompress(REPORT.read_bytes()))
        outs[how] = tmp_path / f"out-{how}"
        env = {"TRACEATTR_NSYS": str(real_nsys), "TRACEATTR_REPORT_EXPORT": how}
        done = run("attribute", str(rep), "--format", "csv", "--out", str(outs[how]), env=env)
        assert done.returncode == 0, done.stderr
        left = sorted(p.name for p in folder.iterdir())
        assert left == (["report1.qdrep"] if how == "arrow" else ["report1.qdrep", "report1.sqlite"])
    for table in ("ranges.csv", "kernels.csv"):
        assert (outs["arrow"] / table).read_bytes() == (outs["sqlite"] / table).read_bytes(), table
    names = pl.read_csv(outs["arrow"] / "ranges.csv")["name"].value_counts()
    assert dict(names.iter_rows()) == {"MPI": 1000, "Jacobi solve": 2, "[unattributed]": 1}
    kernels = pl.read_csv(outs["arrow"] / "kernels.csv")
    assert kernels.height == 9008 and set(kernels["kind"]) == {"kernel", "memcpy", "memset"}
    assert os.environ.get("TRACEATTR_REPORT_EXPORT") is None  # the test's own environment is left alone


def test_no_home_folder_means_no_cached_export_to_reuse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without HOME (or XDG_CACHE_HOME) there is no cache folder to look in: the lookup finds nothing, no traceback."""
    from traceattr.trace import nsys

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(nsys.Path, "home", staticmethod(no_home))
    rep = raw_report(tmp_path)
    assert nsys.fresh_sqlite_export(rep) is None
