"""The sqlite3 fallback's worker processes (issue 20): the frames they make are the one-thread reader's,
a worker that cannot start or dies costs nothing but time, and a stop ends them.

The values tests read a synthetic table through :mod:`traceattr.trace.sqlite_worker` both in this process
(its column building, batch by batch) and in real worker processes, against :func:`_columns_of`.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from traceattr.core.errors import TraceError
from traceattr.trace import loader, sqlite_processes, sqlite_source, sqlite_worker
from traceattr.trace.sqlite_source import Query, SqliteSource, columns_of_worker

ROWS = 3 * sqlite_worker.BATCH_ROWS + 5  # several of the worker's batches, the last one short
COLUMNS = {  # column: its value in row i (what changes between batches is what the worker must follow)
    "ints": lambda i: i * 7 - 10_000,
    "ints_nulls": lambda i: None if i % 3 == 0 else i,
    "nulls": lambda i: None,
    "nulls_then_ints": lambda i: None if i < sqlite_worker.BATCH_ROWS + 3 else i,
    "ints_then_real": lambda i: 2.5 if i == ROWS - 2 else 2**53 + i,  # whole numbers as float() makes them
    "reals": lambda i: None if i % 5 == 0 else i / 4,
    "text": lambda i: None if i % 7 == 0 else f"name {i} ü",
    "ints_then_text": lambda i: "x" if i == ROWS - 1 else i,  # mixed: refused, as the row reader refuses it
    "ints_then_blob": lambda i: b"\x00\xff" if i == 2 * sqlite_worker.BATCH_ROWS else i,
    "big": lambda i: -(2**63) if i % 2 else 2**63 - 1,
}


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fallback") / "values.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(f"CREATE TABLE t ({', '.join(COLUMNS)})")  # no declared types: each value keeps its own
        db.executemany(
            f"INSERT INTO t VALUES ({', '.join('?' * len(COLUMNS))})",
            [tuple(f(i) for f in COLUMNS.values()) for i in range(ROWS)],
        )
    db.close()
    return path


def _one_thread(conn: sqlite3.Connection, sql: str, names: list[str]) -> pl.DataFrame:
    return sqlite_source._columns_of(conn.execute(sql).fetchall(), names)


@pytest.mark.parametrize("column", list(COLUMNS))
def test_worker_columns_are_the_row_readers(table: Path, column: str) -> None:
    conn = sqlite3.connect(sqlite_source.read_only_uri(table), uri=True)
    conn.text_factory = bytes
    sql = f"SELECT {column} FROM t ORDER BY rowid"
    rows, built = sqlite_worker.read(conn, sql)
    answer = (rows, [c.payload() for c in built])
    try:
        expected = _one_thread(conn, sql, [column])
    except TypeError:
        with pytest.raises(TypeError):
            columns_of_worker(answer, [column])
        return
    got = columns_of_worker(answer, [column])
    assert got.schema == expected.schema and got.equals(expected)


@pytest.mark.slow
def test_worker_processes_read_what_one_thread_reads(table: Path) -> None:
    """Every column through real workers, typed and untyped, and the refusals as the same TraceError."""
    fits = {"ints": pl.Int64, "ints_nulls": pl.Int32, "nulls": pl.Int64, "nulls_then_ints": pl.Int64,
            "reals": pl.Float64, "text": pl.String, "big": pl.Int64}  # fmt: skip
    misfits = {"ints_then_real": pl.Int64, "ints_then_text": pl.Int64, "ints_then_blob": pl.Int64}
    queries = [Query(f"SELECT {', '.join(fits)} FROM t WHERE rowid BETWEEN {a} AND {a + 9999}", fits, "reading t",
                     rows=10_000) for a in range(1, ROWS + 1, 10_000)]  # fmt: skip
    with SqliteSource(table, "sqlite3") as src:
        one, many = [src.read(q) for q in queries], src._read_in_processes(queries, 2)
        assert all(f.schema == g.schema and f.equals(g) for f, g in zip(one, many, strict=True))
        for column, dtype in misfits.items():
            query = Query(f"SELECT {column} FROM t", {column: dtype}, f"reading {column}", rows=ROWS)
            with pytest.raises(TraceError) as one:
                src.read(query)
            with pytest.raises(TraceError) as many:
                src._read_in_processes([query, query], 2)
            assert str(many.value) == str(one.value)


def _queries(path: Path) -> list[Query]:
    """The loader's reads of *path*, as it asks for them."""
    seen: list[Query] = []
    with SqliteSource(path, "sqlite3") as src:
        read_all = src.read_all
        src.read_all = lambda qs: (seen.extend(qs), read_all(qs))[1]  # type: ignore[method-assign]
        loader._load(src)
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["nsysai_mfu_2gpu_before", "fuser_h200_nsys2025_1", "h200_flashinfer_mla"])
def test_fixture_reads_in_processes_equal_one_thread(exports: dict[str, Path], fixture: str) -> None:
    queries = _queries(exports[fixture])
    with SqliteSource(exports[fixture], "sqlite3") as src:
        one = [src.read(q) for q in queries]
        many = src._read_in_processes(queries, 2)
    for query, a, b in zip(queries, one, many, strict=True):
        assert a.schema == b.schema and a.equals(b), query.sql


DIES_AFTER_HELLO = """
import marshal, sqlite3, sys
marshal.load(sys.stdin.buffer)
marshal.dump(("ready", sqlite3.sqlite_version), sys.stdout.buffer)
sys.stdout.buffer.flush()
marshal.load(sys.stdin.buffer)
"""


@pytest.mark.parametrize(
    "command",
    [["/nonexistent/python"], [sys.executable, "-c", "pass"], [sys.executable, "-c", DIES_AFTER_HELLO]],
    ids=["cannot-start", "exits-at-once", "dies-mid-read"],
)
def test_a_failing_worker_falls_back_to_this_process(
    exports: dict[str, Path], monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    path = exports["h200_flashinfer_mla"]
    expected = loader.load_trace(path, engine="adbc")
    monkeypatch.setenv("TRACEATTR_READ_PROCESSES", "2")
    monkeypatch.setattr(sqlite_processes, "worker_command", lambda: command)
    trace = loader.load_trace(path, engine="sqlite3")
    for name in ("gpu_ops", "api", "ranges", "marks", "strings"):
        assert getattr(trace, name).equals(getattr(expected, name)), name


# the CLI without ADBC, its workers slowed so that a stop lands while they read
SLOW_FALLBACK = """
import sys
sys.modules["adbc_driver_manager"] = sys.modules["adbc_driver_sqlite"] = None
from traceattr.trace import sqlite_processes
slow = "import sys, time; sys.path.insert(0, sys.argv[1]); import sqlite_worker as w; read = w.read; "
slow += "w.read = lambda c, s: (time.sleep(60), read(c, s))[1]; w.main()"
folder = str(sqlite_processes.WORKER_SCRIPT.parent)
sqlite_processes.worker_command = lambda: [sys.executable, "-I", "-S", "-c", slow, folder]
sys.argv = ["traceattr", *sys.argv[1:]]
from traceattr.cli import main
main()
"""


def _workers_of(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == pid and b"sqlite_worker" in cmdline and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["Ctrl-C", "SIGTERM"])
def test_a_stop_ends_the_workers_cleanly(exports: dict[str, Path], tmp_path: Path, signum: int) -> None:
    env = {**os.environ, "TRACEATTR_READ_PROCESSES": "2"}
    argv = [sys.executable, "-c", SLOW_FALLBACK, "attribute", str(exports["h200_flashinfer_mla"]), "-o",
            str(tmp_path / "out"), "-f", "csv"]  # fmt: skip
    # a session of its own: Ctrl-C at a terminal reaches every process of the group, workers included
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    deadline = time.monotonic() + 60
    while len(workers := _workers_of(proc.pid)) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(workers) == 2, "the workers did not start"
    time.sleep(0.3)  # they have the query now
    started = time.monotonic()
    if signum == signal.SIGINT:
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)  # would wait for a worker holding our stderr
    assert time.monotonic() - started < 20  # not the workers' 60 s
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2, err  # the slow-path note, the stop
    assert not _workers_of(proc.pid)
    for pid in workers:
        assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def test_a_damaged_file_is_one_line_through_workers(exports: dict[str, Path], tmp_path: Path) -> None:
    damaged = tmp_path / "cut.sqlite"
    data = exports["nsysai_mfu_2gpu_before"].read_bytes()
    damaged.write_bytes(data[: len(data) * 2 // 3])
    env = {**os.environ, "TRACEATTR_READ_PROCESSES": "2"}
    snippet = 'import sys; sys.modules["adbc_driver_manager"] = sys.modules["adbc_driver_sqlite"] = None\n'
    snippet += 'sys.argv = ["traceattr", *sys.argv[1:]]\nfrom traceattr.cli import main\nmain()'
    done = subprocess.run([sys.executable, "-c", snippet, "attribute", str(damaged), "-o", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=120, env=env, check=False)  # fmt: skip
    lines = [line for line in done.stderr.strip().splitlines() if "adbc-driver-sqlite" not in line]
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "damaged or truncated" in lines[0] and str(damaged.name) in lines[0]
