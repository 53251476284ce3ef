"""Loading real exports of every schema version, and the quirks each one carries."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from tests.helpers import FIXTURES
from tests.synth.builder import TraceBuilder
from tests.synth.writer import write_export
from traceattr.attribution.engine import NO_LAUNCH, attribute
from traceattr.core.errors import NoDataError, TraceError
from traceattr.trace import schema as S
from traceattr.trace import sqlite_source
from traceattr.trace.loader import load_trace
from traceattr.trace.sqlite_source import Query, SqliteSource


@pytest.mark.parametrize("name", FIXTURES)
def test_engines_agree(exports: dict[str, Path], name: str) -> None:
    a = load_trace(exports[name], engine="adbc")
    b = load_trace(exports[name], engine="sqlite3")
    for frame in ("gpu_ops", "api", "ranges", "marks", "strings", "devices"):
        assert getattr(a, frame).equals(getattr(b, frame)), frame
    assert a.meta.notes == b.meta.notes
    # every column, typed, whatever this schema version holds (absent ones are read as NULL)
    assert dict(a.gpu_ops.schema) == S.GPU_OPS_SCHEMA
    assert dict(a.api.schema) == S.API_SCHEMA
    assert dict(a.ranges.schema) == S.RANGES_SCHEMA


def test_columns_a_table_lacks_are_null_not_read(exports: dict[str, Path]) -> None:
    trace = load_trace(exports["h200_flashinfer_mla"])
    kernels = trace.gpu_ops.filter(pl.col("kind") == "kernel")
    assert kernels.height > 0
    assert kernels["bytes"].null_count() == kernels.height  # memcpy/memset columns: never in the kernel table
    assert kernels["copy_kind"].null_count() == kernels.height
    assert kernels["grid_x"].null_count() == 0 and kernels["name_id"].null_count() == 0
    assert trace.ranges["style"].to_list().count("PushPop") == trace.ranges.height  # eventType 59 → PushPop
    # pid and tid decoded from globalTid as nsys does in SQL
    tid = trace.ranges["global_tid"]
    assert trace.ranges["pid"].to_list() == ((tid // (1 << 24)) & 0xFFFFFF).cast(pl.Int32).to_list()
    assert trace.ranges["tid"].to_list() == (tid & 0xFFFFFF).cast(pl.Int32).to_list()


def test_marks_are_named_in_their_process_domain(tmp_path: Path) -> None:
    b = TraceBuilder()
    dom = b.domain("traceattr", tid=1, pid=7)
    b.push_range(tid=1, start=10, end=90, message="call", domain=dom, pid=7)
    b.launch(tid=1, start=20, end=30, kernel="k", gpu_start=40, gpu_end=50, pid=7)
    b.mark(tid=3, time=15, message="here", domain=dom, pid=7)
    b.mark(tid=4, time=16, message="there", pid=8)  # no domain: the message alone
    b.mark(tid=5, time=17, message="elsewhere", domain=dom, pid=9)  # same domain id, another process: unnamed
    marks = load_trace(write_export(tmp_path / "m.sqlite", b.tables())).marks.sort("time")
    assert marks["name"].to_list() == ["traceattr:here", "there", "elsewhere"]
    assert marks["pid"].to_list() == [7, 8, 9] and marks["tid"].to_list() == [3, 4, 5]
    assert marks["domain"].to_list() == ["traceattr", None, None]


def test_reads_start_biggest_first_and_return_in_order(exports: dict[str, Path], monkeypatch) -> None:
    submitted: list[int] = []

    class Pool(sqlite_source.ThreadPoolExecutor):
        def submit(self, fn, query, /):  # type: ignore[override]
            submitted.append(query.rows)
            return super().submit(fn, query)

    monkeypatch.setattr(sqlite_source, "usable_cpus", lambda: 2)
    monkeypatch.setattr(sqlite_source, "ThreadPoolExecutor", Pool)
    queries = [Query(f"SELECT {n} AS n", {"n": pl.Int64}, f"query {n}", rows=n) for n in (1, 30, 5, 400, 2)]
    with SqliteSource(exports["h200_flashinfer_mla"]) as src:
        frames = src.read_all(queries)
    assert [f["n"].item() for f in frames] == [1, 30, 5, 400, 2]  # in the order asked
    assert submitted == [400, 30, 5, 2, 1]  # queued by size: no big read left for the end


def test_oldest_schema_quirks(exports: dict[str, Path]) -> None:
    trace = load_trace(exports["pipit_saxpy_mpi_a100"])
    assert trace.meta.schema_version == "2.9.1" and trace.meta.nsys_version.startswith("2022.2")
    assert trace.meta.duplicate_api_rows == 38  # eventClass 0 and 67 rows per call
    assert trace.meta.graph_trace_mode is None  # no META_DATA_CAPTURE in 2022.2
    names = set(trace.ranges["name"].to_list())
    assert "saxpy" in names and "MPI:MPI_Send" in names  # inline text; registered string in a named domain
    assert trace.gpu_ops["graph_id"].null_count() == trace.gpu_ops.height  # column absent in this schema


def test_graph_trace_mode_is_detected(exports: dict[str, Path]) -> None:
    trace = load_trace(exports["flameox_graph_rtx3060"])
    assert trace.meta.graph_trace_mode == "graph"
    assert trace.meta.graph_trace_rows == 2 and trace.meta.graph_nodes_hidden
    assert any("--cuda-graph-trace=node" in n for n in trace.meta.notes)
    assert any("no NVTX_EVENTS table" in n for n in trace.meta.notes)
    graph_ops = trace.gpu_ops.filter(pl.col("kind") == "graph")
    assert graph_ops.height == 2 and graph_ops["graph_id"].to_list() == [1, 1]


def test_node_mode_graph_kernels_are_ordinary_kernels(exports: dict[str, Path]) -> None:
    trace = load_trace(exports["h200_torch_tiny"])
    assert trace.meta.graph_trace_mode == "node" and trace.meta.graph_launches == 3
    assert not trace.meta.graph_nodes_hidden
    assert trace.gpu_ops["graph_node_id"].is_not_null().sum() > 0


def test_domain_without_create_row_and_cross_rank_correlation(exports: dict[str, Path]) -> None:
    trace = load_trace(exports["nsysai_mfu_2gpu_before"])
    nccl = trace.ranges.filter(pl.col("domain_id") == 1)
    assert nccl.height == 462 and nccl["domain"].null_count() == nccl.height  # no DomainCreate row
    assert nccl["name"].null_count() == 0  # named from the registered string alone, as nsys does
    # correlation ids collide across the two ranks: same id, two processes
    ops = trace.gpu_ops.group_by("correlation_id").agg(pl.col("global_pid").n_unique().alias("p"))
    assert ops["p"].max() == 2
    assert trace.devices.height == 0  # TARGET_INFO_GPU absent


def test_orphan_kernels_of_a_sliced_trace(exports: dict[str, Path]) -> None:
    att = attribute(load_trace(exports["nsysai_h100_2gpu_1s"]))
    orphans = att.ranges.filter(pl.col("name") == NO_LAUNCH)
    assert orphans["kernels"].item() == 1810
    assert any("no launch record" in n for n in att.notes)


def test_devices_are_read(exports: dict[str, Path]) -> None:
    dev = load_trace(exports["h200_flashinfer_mla"]).devices
    assert dev["name"].to_list() == ["NVIDIA H200"] and dev["cc_major"].item() == 9


def test_non_utf8_text_is_replaced_not_fatal(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.push_range(tid=1, start=0, end=100, message="call", registered=False)
    b.launch(tid=1, start=10, end=20, kernel="k", gpu_start=30, gpu_end=40)
    tables = b.tables()
    path = write_export(tmp_path / "t.sqlite", tables)
    import sqlite3

    with sqlite3.connect(path) as conn:  # raw bytes that are not UTF-8, as old exports hold
        conn.execute("UPDATE NVTX_EVENTS SET text = CAST(x'63616c6cff' AS TEXT) WHERE eventType = 59")
        conn.execute("UPDATE StringIds SET value = CAST(x'6bfe' AS TEXT) WHERE value = 'k'")
    for engine in ("adbc", "sqlite3"):
        trace = load_trace(path, engine)
        assert trace.ranges["name"].to_list() == ["call\ufffd"]
        assert "k\ufffd" in trace.strings["value"].to_list()


def test_missing_tables(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.launch(tid=1, start=10, end=20, kernel="k", gpu_start=30, gpu_end=40)
    tables = b.tables()
    no_nvtx = write_export(tmp_path / "a.sqlite", tables)
    att = attribute(load_trace(no_nvtx))  # no NVTX_EVENTS: everything unattributed, not an error
    assert att.ranges["name"].to_list() == ["[unattributed]"]
    no_runtime = write_export(
        tmp_path / "b.sqlite", {k: v for k, v in tables.items() if k != "CUPTI_ACTIVITY_KIND_RUNTIME"}
    )
    att = attribute(load_trace(no_runtime))
    assert att.ranges["name"].to_list() == [NO_LAUNCH]
    only_api = {k: v for k, v in tables.items() if k != "CUPTI_ACTIVITY_KIND_KERNEL"}
    with pytest.raises(NoDataError, match="no GPU operations"):
        load_trace(write_export(tmp_path / "c.sqlite", only_api))
    only_strings = {"StringIds": tables["StringIds"]}
    with pytest.raises(NoDataError, match="no CUDA trace"):
        load_trace(write_export(tmp_path / "d.sqlite", only_strings))


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda p: p.write_bytes(b""), "is an empty file"),
        (lambda p: p.write_text("not a database at all"), "is not an SQLite database"),
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: None, "no such file"),
    ],
)
def test_bad_paths(tmp_path: Path, make, problem: str) -> None:
    path = tmp_path / "x.sqlite"
    make(path)
    with pytest.raises(TraceError, match=problem) as err:
        load_trace(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_truncated_and_foreign_sqlite(tmp_path: Path, exports: dict[str, Path]) -> None:
    data = exports["h200_flashinfer_mla"].read_bytes()
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(data[: len(data) // 3])
    with pytest.raises(TraceError, match="damaged or truncated"):
        load_trace(cut)
    import sqlite3

    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).execute("PRAGMA user_version = 1").connection.commit()
    with pytest.raises(TraceError, match="empty SQLite database"):
        load_trace(empty)
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE people (name TEXT)")
    with pytest.raises(TraceError, match="not an nsys export"):
        load_trace(foreign)


def test_rows_read_again_by_rowid_are_the_rows_loaded(exports: dict[str, Path]) -> None:
    from traceattr.trace.loader import load_rows, row_ids

    path = exports["h200_traceattr_sweep"]
    trace = load_trace(path)
    rows = row_ids(path, trace)
    assert rows is not None
    some = [(3, 5), (40, 40)]
    part = load_rows(rows, [(r, r + 2) for r in trace.ranges["range_id"].gather([1, 7]).to_list()], some, some)
    ops = trace.gpu_ops[[3, 4, 5, 40]]  # DataFrame.gather is newer than polars 1.28, the floor
    assert_frame_equal(part.gpu_ops.drop("op_id"), ops.drop("op_id"))
    assert part.gpu_ops["op_id"].to_list() == [0, 1, 2, 3]  # the part's own ids
    assert_frame_equal(part.api.drop("api_id"), trace.api[[3, 4, 5, 40]].drop("api_id"))
    assert part.ranges.height == 6
    assert_frame_equal(part.ranges, trace.ranges.join(part.ranges.select("range_id"), on="range_id", how="semi"))
