"""Hostile and impossible input, interrupted and concurrent runs (issue 9).

Every case is built at test time from the example sweep (a real H200
capture): copied, then changed with SQL. Each must end in one line and exit
status 2 (or a note naming what was found), never a traceback, never change
its input, and leave the previous result set whole.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import warnings
from pathlib import Path

import polars as pl
import pytest

from tests.helpers import cli, mutate, one_line, raw_report

EXAMPLES = Path(__file__).parent.parent / "examples" / "traces"
SWEEP = EXAMPLES / "h200_mla_sweep.sqlite"
OTHER = EXAMPLES / "h200_mla_fa2_fa3.sqlite"
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"


def run(*args: object, timeout: float = 120, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "traceattr", *map(str, args)],
        capture_output=True, text=True, timeout=timeout, check=False, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def digest(folder: Path) -> dict[str, str]:
    """Every file under *folder* (names and contents), to show nothing changed."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "-"
        for p in sorted(folder.rglob("*"))
    }


def unconstrained(table: str, then: str) -> str:
    """*then* on a copy of *table* without NOT NULL/UNIQUE constraints (so NULLs and duplicates fit)."""
    return (
        f'CREATE TABLE t2 AS SELECT * FROM "{table}"; DROP TABLE "{table}"; ALTER TABLE t2 RENAME TO "{table}"; {then}'
    )


# id, SQL, words the one line must hold
IMPOSSIBLE = [
    ("device-id-2^40", f"UPDATE {KERNEL} SET deviceId=1099511627776 WHERE rowid=1", "device_id holds '1099511627776'"),
    ("gridx-2^32", f"UPDATE {KERNEL} SET gridX=4294967296 WHERE rowid=1", "grid_x holds '4294967296'"),
    ("end-2^64", f'UPDATE {KERNEL} SET "end"=18446744073709551615 WHERE rowid=1', "end holds"),
    ("start-text", f"UPDATE {KERNEL} SET start='abc' WHERE rowid=1", "start holds 'abc'"),
    ("nvtx-span-2^63", 'UPDATE NVTX_EVENTS SET "end"=9223372036854775807 WHERE rowid=2', "span 292 years"),
    ("no-end-column", f'ALTER TABLE {KERNEL} DROP COLUMN "end"', "450 of 450 rows have no end time"),
    ("no-start-column", f"ALTER TABLE {KERNEL} DROP COLUMN start", "450 of 450 rows have no start time"),
    ("null-starts", unconstrained(KERNEL, f"UPDATE {KERNEL} SET start=NULL WHERE rowid % 3 = 0"), "150 of 450 rows have no start"),
    ("end-before-start", f'UPDATE {KERNEL} SET "end"=start-1000', "450 of 450 rows end before they start"),
    ("one-correlation-id", "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET correlationId=1", "correlationId 1 is shared by 2,203"),
    ("no-correlation-column", f"ALTER TABLE {KERNEL} DROP COLUMN correlationId", "GPU ops carry no correlationId"),
    ("duplicate-string-ids", unconstrained("StringIds", "INSERT INTO StringIds SELECT id, value || 'x' FROM StringIds WHERE id = 0"), "id 0 is given 2 times"),
    ("nvtx-without-threads", "UPDATE NVTX_EVENTS SET globalTid=NULL", "globalTid is NULL"),
    ("view-on-missing-table", "CREATE TABLE t(id INTEGER, value TEXT); INSERT INTO t SELECT * FROM StringIds; DROP TABLE StringIds; CREATE VIEW StringIds AS SELECT * FROM t; DROP TABLE t", "no such table"),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "needle"), [c[1:] for c in IMPOSSIBLE], ids=[c[0] for c in IMPOSSIBLE])
@pytest.mark.parametrize("command", ["attribute", "compare"])
def test_impossible_values_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, sql: str, needle: str
) -> None:
    path = mutate(tmp_path, sql)
    before = digest(tmp_path)
    rc, _, err = cli(capsys, command, path)
    if command == "compare" and "gridX" in sql:  # compare reads no launch configuration: it answers, unharmed
        assert rc == 0 and "grid" not in err, err
        assert digest(tmp_path) == before
        return
    line = one_line(rc, err, needle, str(path))
    assert "INVALID_ARGUMENT" not in line and "[SQLite]" not in line  # ADBC's words, not ours
    assert digest(tmp_path) == before  # input untouched, nothing written beside it


@pytest.mark.parametrize(("sql", "needle"), [c[1:] for c in IMPOSSIBLE], ids=[c[0] for c in IMPOSSIBLE])
def test_impossible_values_refused_by_both_engines(tmp_path: Path, sql: str, needle: str) -> None:
    from traceattr.core.errors import TraceError
    from traceattr.trace.loader import load_trace

    path = mutate(tmp_path, sql)
    for engine in ("adbc", "sqlite3"):
        with pytest.raises(TraceError) as err:
            load_trace(path, engine)
        assert needle.split("'")[0].strip() in str(err.value), (engine, str(err.value))


def test_report_refuses_impossible_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = mutate(tmp_path, unconstrained(KERNEL, f"UPDATE {KERNEL} SET start=NULL WHERE rowid % 3 = 0"))
    rc, _, err = cli(capsys, "report", path)
    one_line(rc, err, "have no start time")
    assert not path.with_name("m.report.html").exists()


def test_wal_and_hot_journal_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wal = mutate(tmp_path, "PRAGMA journal_mode=WAL", "w.sqlite")
    conn = sqlite3.connect(wal)
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute(f"INSERT INTO {KERNEL} SELECT * FROM {KERNEL}")  # 450 more kernels, only in the -wal
    conn.commit()
    copy = tmp_path / "copy"
    copy.mkdir()
    for suffix in ("", "-wal"):  # what a copy taken mid-write holds
        shutil.copyfile(f"{wal}{suffix}", copy / f"w.sqlite{suffix}")
    conn.close()
    before = digest(copy)
    rc, _, err = cli(capsys, "attribute", copy / "w.sqlite")
    one_line(rc, err, "write-ahead log", "w.sqlite-wal")
    assert digest(copy) == before
    hot = mutate(tmp_path, "", "j.sqlite")
    Path(f"{hot}-journal").write_bytes(b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7" + bytes(504))
    rc, _, err = cli(capsys, "attribute", hot)
    line = one_line(rc, err, "rollback journal", "mid-transaction")
    assert "damaged" not in line


@pytest.mark.slow
def test_rangeless_names_partial_threads_and_long_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from traceattr.trace.loader import load_trace
    from traceattr.trace.validate import MAX_RANGE_NAME_CHARS

    # no range has a name: still read, under a label that says so; nothing to compare (exit 2)
    unnamed = mutate(tmp_path, "UPDATE NVTX_EVENTS SET text=NULL, textId=NULL", "unnamed.sqlite")
    rc, _, err = cli(capsys, "compare", unnamed)
    assert rc == 2 and "[unnamed range]" in err, err
    # half the NVTX rows without a thread: no library warning leaks to the user
    half = mutate(tmp_path, "UPDATE NVTX_EVENTS SET globalTid=NULL WHERE rowid % 2 = 0", "half.sqlite")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_trace(half)
    # one 1 MB domain name, one 1 MB shared range text: range names stay short, the note says so
    huge = "D" * (1 << 20)
    big = mutate(tmp_path, "", "big.sqlite")
    with sqlite3.connect(big) as conn:
        conn.execute("UPDATE NVTX_EVENTS SET text=? WHERE eventType=75", (huge,))
    conn.close()
    trace = load_trace(big)
    assert trace.ranges["name"].str.len_chars().max() <= 2 * MAX_RANGE_NAME_CHARS + 1
    assert any("the longest: 1,048,576" in n for n in trace.meta.notes)


@pytest.mark.slow
def test_long_kernel_name_keeps_report_small(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = mutate(tmp_path, "", "k.sqlite")
    with sqlite3.connect(path) as conn:
        (name_id,) = conn.execute(f"SELECT demangledName FROM {KERNEL} LIMIT 1").fetchone()
        conn.execute("UPDATE StringIds SET value=? WHERE id=?", ("K" * (1 << 20), name_id))
        conn.execute("UPDATE NVTX_EVENTS SET text=? WHERE eventType=75", ("D" * (1 << 20),))
    conn.close()
    rc, _, err = cli(capsys, "report", path, "-o", tmp_path / "k.html")
    assert rc == 0, err
    normal = 6_000_000  # the report of the unchanged trace is ~5.7 MB
    assert (tmp_path / "k.html").stat().st_size < 2 * normal


ESC = "\x1b"


@pytest.mark.slow
def test_escape_sequences_never_reach_the_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clear, link = "\x1b[2J\x1b[H", "\x1b]8;;https://example.invalid\x07click\x1b]8;;\x07"
    path = mutate(tmp_path, "", "esc.sqlite")
    with sqlite3.connect(path) as conn:
        (name_id,) = conn.execute(f"SELECT demangledName FROM {KERNEL} LIMIT 1").fetchone()
        conn.execute("UPDATE StringIds SET value=? WHERE id=?", (f"evil{clear}{link}kernel\nsecond line", name_id))
        conn.execute("UPDATE NVTX_EVENTS SET text=? WHERE eventType=75", (f"dom[bold]{clear}",))
    conn.close()
    for command in ("attribute", "compare"):
        rc, out, err = cli(capsys, command, path)
        assert rc == 0, err
        assert ESC not in out and "\x07" not in out and ESC not in err, command
    assert "\\x1b[2J" in cli(capsys, "attribute", path)[1]  # shown, not obeyed
    # a file name holding a newline and an escape: still one line, nothing obeyed
    odd = tmp_path / f"two\nlines{clear}.sqlite"
    rc, _, err = cli(capsys, "attribute", odd)
    assert ESC not in one_line(rc, err, "\\x0a", ".sqlite: ")


# -- arguments ------------------------------------------------------------------

BAD_ARGS = [
    ("attribute", SWEEP, "--limit", "99999999999999999999"),
    ("attribute", SWEEP, "--mode", "bogus"),
    ("attribute", SWEEP, "--format", "xml"),
    ("compare", SWEEP, "--bandwidth", "-1"),
    ("compare", SWEEP, "--bandwidth", "nan"),
    ("compare", SWEEP, "--bandwidth", "0"),
    ("profile", "--dry-run", "-s", "q8_ctx" + "9" * 5000),
    ("profile", "--dry-run", "-s", "q8_ctx99999999999999m"),
    ("profile", "--dry-run", "-s", "q8_ctx999m"),
    ("profile", "--dry-run", "-s", "q\uff18_ctx\uff18k"),  # fullwidth digits
    ("profile", "--dry-run", "-s", "q8_ctx8k", "--flush-mb", "-5"),
    ("profile", "--dry-run", "-s", "q8_ctx8k", "-b", "fa3", "-b", "fa3"),
]


@pytest.mark.parametrize("args", BAD_ARGS, ids=lambda a: " ".join(map(str, a[:1] + a[2:]))[:40])
def test_bad_arguments_are_one_line(capsys: pytest.CaptureFixture[str], args: tuple[object, ...]) -> None:
    rc, _, err = cli(capsys, *args)
    line = one_line(rc, err)
    assert len(line) < 400 and "╭" not in err and "Usage" not in err


def test_bad_rules_files_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = {
        "latin1.toml": (b'[[rule]]\nrole = "attention"\npattern = "caf\xe9"\n', "not UTF-8"),
        "ints.toml": (b"rule = [1, 2]\n", "expected a [[rule]] table"),
        "nested.toml": (b'[[rule]]\nrole = "copy"\nkinds = [["kernel"]]\n', "kinds must be a list"),
    }
    for name, (content, needle) in cases.items():
        (tmp_path / name).write_bytes(content)
        rc, _, err = cli(capsys, "attribute", SWEEP, "--rules", tmp_path / name)
        one_line(rc, err, needle, name)


@pytest.mark.slow
def test_special_files_do_not_hang(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "pipe.sqlite"
    os.mkfifo(fifo)
    rep_fifo = tmp_path / "pipe.nsys-rep"
    os.mkfifo(rep_fifo)
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "dangling.sqlite").symlink_to(tmp_path / "nothing.sqlite")
    for path in (fifo, rep_fifo):  # in a child process: a hang fails here instead of blocking the suite
        out = run("attribute", path, timeout=60)
        one_line(out.returncode, out.stderr, "not a regular file", path.name)
    for path, needle in ((tmp_path / "a", "symbolic link loop"), (tmp_path / "dangling.sqlite", "missing file")):
        one_line(*cli(capsys, "attribute", path)[::2], needle)


# -- outputs: never over an input or a stranger's file; one whole set ----------


@pytest.mark.slow
def test_never_writes_over_inputs_or_other_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "v.sqlite"
    shutil.copyfile(SWEEP, trace)
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    before = digest(tmp_path)
    refusals = [
        (("report", trace, "-o", trace), "is an input"),
        (("report", trace, "-o", notes), "not written by traceattr"),
        (("attribute", trace, "--out", trace), "is not a folder"),
        (("attribute", trace, "--out", notes), "is not a folder"),
        (("attribute", trace, "--out", tmp_path), "holds the input"),
        (("compare", trace, "--out", tmp_path), "holds the input"),
        (("diff", trace, trace, "--out", tmp_path), "holds the input"),
        (("compare", trace, "--json", notes), "not written by traceattr"),
    ]
    for args, needle in refusals:
        rc, _, err = cli(capsys, *args)
        one_line(rc, err, needle)
        assert digest(tmp_path) == before, args
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("user file")
    rc, _, err = cli(capsys, "attribute", trace, "--out", other)
    one_line(rc, err, "holds files traceattr did not write (keep.txt)")
    # its own outputs may be replaced: a report twice, a result folder twice
    for _ in range(2):
        assert cli(capsys, "report", trace, "-o", tmp_path / "r.html")[0] == 0
        assert cli(capsys, "attribute", trace, "--out", tmp_path / "res", "-f", "csv")[0] == 0
        assert cli(capsys, "compare", trace, "--out", tmp_path / "cmp")[0] == 0
    assert trace.read_bytes() == SWEEP.read_bytes()


def _set_of(folder: Path) -> tuple[str, int]:
    """(input named by the manifest, ranges rows): both must come from the same run."""
    manifest = json.loads((folder / "attribution.json").read_text())
    assert sorted([*manifest["outputs"], "attribution.json"]) == sorted(p.name for p in folder.iterdir())
    return Path(manifest["input"]).name, pl.read_parquet(folder / "ranges.parquet").height


@pytest.fixture(scope="module")
def expected_sets() -> dict[str, int]:
    """Ranges rows of each example's set, by input name."""
    from traceattr.attribution.engine import attribute
    from traceattr.trace.loader import load_trace

    return {p.name: attribute(load_trace(p)).ranges.height for p in (SWEEP, OTHER)}


def _no_partials(root: Path) -> None:
    left = [p for p in root.rglob("*") if ".partial" in p.name or ".old." in p.name]
    assert not left, left


def test_failed_write_keeps_previous_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from traceattr.core import output

    out = tmp_path / "res"
    assert cli(capsys, "attribute", SWEEP, "--out", out, "-f", "parquet")[0] == 0
    previous = digest(out)
    real = output.write_table

    def full_disk(frame, folder, stem, fmt):  # type: ignore[no-untyped-def]
        if stem == "kernels":  # the second table of the set
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(frame, folder, stem, fmt)

    monkeypatch.setattr(output, "write_table", full_disk)
    rc, _, err = cli(capsys, "attribute", OTHER, "--out", out, "-f", "parquet")
    one_line(rc, err, "No space left on device", str(out))
    assert digest(out) == previous
    _no_partials(tmp_path)


@pytest.mark.slow
def test_file_size_limit_keeps_previous_set(tmp_path: Path) -> None:
    """A real write error (the file-size limit, as a full disk) in a separate process."""
    import resource

    out = tmp_path / "res"
    assert run("attribute", SWEEP, "--out", out, "-f", "csv").returncode == 0
    previous = digest(out)

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails instead of killing the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    result = run("attribute", OTHER, "--out", out, "-f", "csv", preexec_fn=limit)
    one_line(result.returncode, result.stderr, "cannot be written")
    assert digest(out) == previous
    _no_partials(tmp_path)


@pytest.mark.parametrize("fmt", ["csv", "parquet", "json", "text"])
def test_outputs_are_written_through_the_descriptor_that_made_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    """A temporary file opened again for writing is truncated, and ext4 (XFS alike) takes a truncated file
    for one being replaced: it writes it back at its close (45-80 ms for a 210 MB table on the 2-core
    benchmark VM). A new file has nothing to lose, so it must never be reopened."""
    import builtins
    import io

    from traceattr.core import output

    reopened: list[str] = []
    real_io_open, real_os_open = io.open, os.open

    def io_open(file, mode="r", *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(file).endswith(output.PARTIAL) and "r" not in mode:
            reopened.append(f"open({file}, {mode!r})")
        return real_io_open(file, mode, *args, **kwargs)

    def os_open(path, flags, *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(path).endswith(output.PARTIAL) and flags & os.O_TRUNC:
            reopened.append(f"os.open({path}, O_TRUNC)")
        return real_os_open(path, flags, *args, **kwargs)

    for module, name, spy in ((io, "open", io_open), (builtins, "open", io_open), (os, "open", os_open)):
        monkeypatch.setattr(module, name, spy)
    frame = pl.DataFrame({"a": range(1000), "b": ["x"] * 1000})
    if fmt == "text":
        written = output.write_text(tmp_path / "t.txt", "text\n")
        assert written.read_bytes() == b"text\n"
    else:
        written = output.write_table(frame.lazy(), tmp_path, "t", fmt)  # type: ignore[arg-type]
        assert written.stat().st_size > 0
    assert reopened == []
    assert written.stat().st_mode & 0o777 == 0o644
    _no_partials(tmp_path)


@pytest.mark.slow
def test_concurrent_runs_never_mix_sets(tmp_path: Path, expected_sets: dict[str, int]) -> None:
    expected = expected_sets
    out = tmp_path / "res"
    for _ in range(2):
        procs = [
            subprocess.Popen([sys.executable, "-m", "traceattr", "attribute", str(src), "--out", str(out),
                              "-f", "parquet"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for src in (SWEEP, OTHER)
        ]  # fmt: skip
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
        name, rows = _set_of(out)
        assert expected[name] == rows
    _no_partials(tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.0, 0.5])
def test_ctrl_c_leaves_a_whole_set(tmp_path: Path, delay: float, expected_sets: dict[str, int]) -> None:
    expected = expected_sets
    out = tmp_path / "res"
    assert run("attribute", SWEEP, "--out", out, "-f", "parquet").returncode == 0
    proc = subprocess.Popen([sys.executable, "-m", "traceattr", "attribute", str(OTHER), "--out", str(out),
                             "-f", "parquet"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    # Python itself cannot catch a Ctrl-C before its first module runs: start the clock once the
    # command is under way (its temporary set folder exists)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".res.*.partial")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT)  # a second Ctrl-C, as an impatient user presses
    _, err = proc.communicate(timeout=120)
    if proc.returncode != 0:  # it may have finished before the signal
        assert proc.returncode == 130 and err.strip().splitlines() == ["traceattr: interrupted"], err
    name, rows = _set_of(out)
    assert expected[name] == rows
    _no_partials(tmp_path)


def test_an_error_raised_over_a_ctrl_c_is_the_ctrl_c(tmp_path: Path) -> None:
    """CPython's Condition.wait, cut by a Ctrl-C before it takes its lock back, raises RuntimeError over the
    KeyboardInterrupt (the read's futures, in CI): that is still the Ctrl-C, exit 130 and one line."""
    code = (
        "import sys\n"
        f"sys.argv = ['traceattr', 'attribute', {str(OTHER)!r}, '--out', {str(tmp_path / 'res')!r}]\n"
        "from traceattr.trace import sqlite_source\n"
        "def read_all(self, queries):\n"
        "    try:\n"
        "        raise KeyboardInterrupt\n"
        "    except KeyboardInterrupt:\n"
        "        raise RuntimeError('cannot release un-acquired lock')\n"
        "sqlite_source.SqliteSource.read_all = read_all\n"
        "from traceattr.cli import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines() == ["traceattr: interrupted"], done.stderr
    assert not (tmp_path / "res").exists()
    _no_partials(tmp_path)


def test_a_stop_swallowed_by_a_callback_still_stops(tmp_path: Path) -> None:
    """A SIGHUP landing where its exception cannot propagate (polars' Rust, a __del__) is reported as unraisable and
    the code goes on to fail on what was left (compare in CI: a TypeError): still the stop, exit 129 and one line."""
    code = (
        "import os, signal, sys, time\n"
        f"sys.argv = ['traceattr', 'attribute', {str(OTHER)!r}, '--out', {str(tmp_path / 'res')!r}]\n"
        "from traceattr.trace import sqlite_source\n"
        "class Callback:\n"
        "    def __del__(self):\n"
        "        os.kill(os.getpid(), signal.SIGHUP)\n"
        "        time.sleep(0.5)\n"
        "def read_all(self, queries):\n"
        "    Callback()\n"
        "    raise TypeError('what the callback left')\n"
        "sqlite_source.SqliteSource.read_all = read_all\n"
        "from traceattr.cli import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 128 + signal.SIGHUP, done.stderr
    assert done.stderr.strip().splitlines() == ["traceattr: stopped by SIGHUP"], done.stderr
    assert not (tmp_path / "res").exists()
    _no_partials(tmp_path)


def test_second_interrupt_during_cleanup_still_cleans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from traceattr.core import output

    real = shutil.rmtree

    def interrupted_rmtree(path, *a, **kw):  # type: ignore[no-untyped-def]
        os.kill(os.getpid(), signal.SIGINT)  # lands while the partial set is being removed
        time.sleep(0.01)
        return real(path, *a, **kw)

    monkeypatch.setattr(output.shutil, "rmtree", interrupted_rmtree)
    with (
        pytest.raises(KeyboardInterrupt),
        output.ResultSet(tmp_path / "res", command="attribute", manifest="m.json") as rs,
    ):
        rs.text("a.txt", "x")
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


# -- .nsys-rep exports ------------------------------------------------------------


def _fake_nsys(tmp_path: Path, *, sleep: float = 0.0, fail: bool = False) -> tuple[Path, Path]:
    """An ``nsys`` that 'exports' by copying the sweep, and logs each call."""
    log = tmp_path / "nsys.log"
    script = tmp_path / "nsys"
    script.write_text(
        f"#!{sys.executable}\nimport shutil, sys, time\n"
        f"open({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        f"time.sleep({sleep})\n"
        + ("sys.exit('fatal: cannot export')\n" if fail else "")
        + f"shutil.copyfile({str(SWEEP)!r}, sys.argv[sys.argv.index('--output') + 1])\n"
    )
    script.chmod(0o755)
    return script, log


@pytest.mark.slow
def test_nsys_rep_export_reuse_and_no_overwrite(tmp_path: Path) -> None:
    nsys, log = _fake_nsys(tmp_path)
    env = {**os.environ, "TRACEATTR_NSYS": str(nsys)}
    rep = raw_report(tmp_path / "fresh")
    assert run("attribute", rep, env=env).returncode == 0
    assert rep.with_suffix(".sqlite").read_bytes() == SWEEP.read_bytes()
    assert sorted(p.name for p in rep.parent.iterdir()) == ["x.nsys-rep", "x.sqlite"]
    # a newer export beside it is reused: nsys is not run again
    calls = log.read_text().count("\n")
    assert run("attribute", rep, env=env).returncode == 0 and log.read_text().count("\n") == calls
    # an older x.sqlite the user made is left alone; the export goes beside it, and a note says so
    rep2 = raw_report(tmp_path / "stale")
    mine = rep2.with_suffix(".sqlite")
    mine.write_bytes(b"my own notes, not an export")
    os.utime(mine, (time.time() - 3600, time.time() - 3600))
    out = run("attribute", rep2, env=env)
    assert out.returncode == 0, out.stderr
    assert mine.read_bytes() == b"my own notes, not an export"
    made = [p for p in rep2.parent.glob("x.*.sqlite")]
    assert len(made) == 1 and made[0].read_bytes() == SWEEP.read_bytes()
    assert f"note: {mine} is older than the report" in out.stderr and str(made[0]) in out.stderr
    assert rep.read_bytes() == rep2.read_bytes() == b"raw capture"


@pytest.mark.slow
def test_nsys_rep_concurrent_and_failed_exports(tmp_path: Path) -> None:
    nsys, _ = _fake_nsys(tmp_path, sleep=1.0)
    env = {**os.environ, "TRACEATTR_NSYS": str(nsys)}
    rep = raw_report(tmp_path / "both")
    procs = [
        subprocess.Popen([sys.executable, "-m", "traceattr", "attribute", str(rep)], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]  # fmt: skip
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert sorted(p.name for p in rep.parent.iterdir()) == ["x.nsys-rep", "x.sqlite"]
    (tmp_path / "bad").mkdir()
    bad, _ = _fake_nsys(tmp_path / "bad", fail=True)
    rep2 = raw_report(tmp_path / "fails")
    out = run("attribute", rep2, env={**os.environ, "TRACEATTR_NSYS": str(bad)})
    one_line(out.returncode, out.stderr, "cannot export")
    assert sorted(p.name for p in rep2.parent.iterdir()) == ["x.nsys-rep"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_places(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    trace = ro / "t.sqlite"
    shutil.copyfile(SWEEP, trace)
    rep = raw_report(ro)
    ro.chmod(0o555)
    try:
        rc, _, err = cli(capsys, "report", trace)  # default destination beside a read-only trace
        one_line(rc, err, "cannot be written")
        rc, _, err = cli(capsys, "attribute", trace, "--out", ro / "res")
        one_line(rc, err, "cannot be written")
        out = run("attribute", rep, env={**os.environ, "HOME": str(ro / "nohome"), "XDG_CACHE_HOME": ""})
        one_line(out.returncode, out.stderr, "no cache folder is usable")
    finally:
        ro.chmod(0o755)


@pytest.mark.slow
def test_out_under_a_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rc, _, err = cli(capsys, "attribute", SWEEP, "--out", blocker / "res")
    one_line(rc, err, "cannot be written")
    rc, _, err = cli(capsys, "report", SWEEP, "-o", blocker / "r.html")
    one_line(rc, err, "cannot be written")
    assert blocker.read_text() == "x"
