"""Values of the wrong type or size, duplicates, impossible magnitudes, ranges that never closed, and
names that reach one file twice (issue 19, classes 2, 5, 6 and 9).

Every case is built at test time from the example exports (real H200 captures): copied, then
changed with SQL. Each ends in one line and exit status 2 (refused), or exit 0 with a note naming
the count where the answer is still given; never a traceback, never a number whose meaning changed
silently.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.helpers import cli, mutate, one_line

EXAMPLES = Path(__file__).parent.parent / "examples" / "traces"
SWEEP = EXAMPLES / "h200_mla_sweep.sqlite"
LEVERS = EXAMPLES / "h200_mla_levers.sqlite"
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
PUSHPOP = "eventType = 59"


def analysed(path: Path) -> tuple[tuple[str, ...], pl.DataFrame, pl.DataFrame]:
    """(notes, ranges, calls) of *path*, as compare computes them."""
    from traceattr.analysis.calls import calls
    from traceattr.attribution.engine import attribute
    from traceattr.trace.loader import load_trace

    att = attribute(load_trace(path))
    return att.notes, att.ranges, calls(att)


# class 5: values of the wrong type or size. id, SQL, words the one line must hold
REFUSED = [
    ("blob-start", f"UPDATE {KERNEL} SET start = x'0102' WHERE rowid = (SELECT min(rowid) FROM {KERNEL})",
     "start holds '\\x01\\x02' in 1 rows"),
    ("real-correlation-ids", f"UPDATE {KERNEL} SET correlationId = correlationId + 0.5",
     "correlation_id holds 7.5 in 450 rows, not a whole number"),
    ("fractional-times", f"UPDATE {KERNEL} SET start = start + 0.25", "start holds 14510443.25 in 450 rows"),
    ("fraction-in-one-row", f'UPDATE {KERNEL} SET "end" = "end" + 0.5 WHERE rowid = 7', "end holds"),
    ("string-ids-past-2^31", "UPDATE StringIds SET id = id + 3000000000", "StringIds: id 3,000,000,485 is outside"),
    ("kernel-name-not-a-string", f"UPDATE {KERNEL} SET demangledName = 99999 WHERE rowid % 2 = 0",
     "demangledName of 225 of 450 kernels is no StringIds id (e.g. 99999)"),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "needle"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
@pytest.mark.parametrize("command", ["attribute", "compare", "report"])
def test_values_of_the_wrong_type_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, sql: str, needle: str
) -> None:
    path = mutate(tmp_path, sql)
    rc, _, err = cli(capsys, command, path, *(["-o", tmp_path / "r.html"] if command == "report" else []))
    one_line(rc, err, needle, str(path))
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(("sql", "needle"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_values_of_the_wrong_type_refused_by_both_engines(tmp_path: Path, sql: str, needle: str) -> None:
    from traceattr.core.errors import TraceError
    from traceattr.trace.loader import load_trace

    path = mutate(tmp_path, sql)
    for engine in ("adbc", "sqlite3"):  # sqlite3 built integer columns from REALs by truncating them
        with pytest.raises(TraceError) as err:
            load_trace(path, engine)
        assert needle.split(" in ")[0].split("'")[0] in str(err.value), (engine, str(err.value))


@pytest.mark.slow
def test_zero_length_kernels_are_noted_and_measure_no_call(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = mutate(tmp_path, f'UPDATE {KERNEL} SET "end" = start')
    rc, out, err = cli(capsys, "attribute", path)
    assert rc == 0 and "450 of 450 kernels last 0 ns" in out + err, out + err
    for command in ("compare", "report"):  # report divided by the 0 µs median
        rc, _, err = cli(capsys, command, path, *(["-o", tmp_path / "r.html"] if command == "report" else []))
        one_line(rc, err, "every NVTX range with GPU work (400) lasts 0 ns")


@pytest.mark.slow
def test_some_zero_length_kernels_are_noted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    notes, _, _ = analysed(mutate(tmp_path, f'UPDATE {KERNEL} SET "end" = start WHERE rowid % 9 = 0'))
    assert any("50 of 450 kernels last 0 ns" in n for n in notes), notes
    # one backend's kernels all 0 ns: its calls measured nothing (the report divided by its 0 µs median)
    one = f"""UPDATE {KERNEL} SET "end" = start WHERE shortName =
              (SELECT id FROM StringIds WHERE value = 'BatchMLAPagedAttentionKernel')"""
    path = mutate(tmp_path, one, name="one.sqlite")
    notes, _, calls = analysed(path)
    assert any("50 of 450 kernels last 0 ns" in n for n in notes) and (calls["gpu_span_ns"] > 0).all()
    rc, out, err = cli(capsys, "compare", path)
    assert rc == 0 and "inf" not in out and "nan" not in out, out + err
    rc, _, err = cli(capsys, "report", path, "-o", tmp_path / "one.html")
    assert rc == 0 and "Traceback" not in err, err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("column", "value", "needle"), [("smCount", "'many'", "smCount holds 'many'"), ("id", "'zero'", "id holds 'zero'")]
)
def test_text_in_gpu_info_is_read_as_unknown_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], column: str, value: str, needle: str
) -> None:
    path = mutate(tmp_path, f"UPDATE TARGET_INFO_GPU SET {column} = {value}")
    rc, out, err = cli(capsys, "compare", path)
    assert rc == 0 and "Traceback" not in err, err
    assert needle in out + err


# class 6: duplicates and impossible magnitudes
def test_duplicated_kernel_rows_are_counted_once(tmp_path: Path) -> None:
    _, ranges, calls = analysed(SWEEP)
    notes, twice, twice_calls = analysed(mutate(tmp_path, f"INSERT INTO {KERNEL} SELECT * FROM {KERNEL}"))
    assert any("450 GPU op rows repeat another row exactly" in n for n in notes), notes
    assert twice["kernel_sum_ns"].sum() == ranges["kernel_sum_ns"].sum()  # was doubled
    assert twice_calls["kernel_sum_ns"].to_list() == calls["kernel_sum_ns"].to_list()


def test_duplicated_nvtx_rows_are_counted_once(tmp_path: Path) -> None:
    _, _, calls = analysed(SWEEP)
    notes, _, twice = analysed(mutate(tmp_path, f"INSERT INTO NVTX_EVENTS SELECT * FROM NVTX_EVENTS WHERE {PUSHPOP}"))
    assert any("400 NVTX ranges repeat another exactly" in n for n in notes), notes
    per_backend = twice.group_by("shape", "backend").len()["len"]
    assert per_backend.max() == 10 and twice.height == calls.height  # was 20 calls per backend


def test_ops_before_their_launch_give_no_negative_latency(tmp_path: Path) -> None:
    shift = f'UPDATE {KERNEL} SET start = start - 1099511627776, "end" = "end" - 1099511627776 WHERE rowid % 7 = 0'
    notes, ranges, calls = analysed(mutate(tmp_path, shift))
    assert any("64 of 450 GPU ops start before the CUDA call that launched them" in n for n in notes), notes
    assert (ranges["launch_latency_ns"].drop_nulls() >= 0).all()
    assert (calls["launch_latency_ns"].drop_nulls() >= 0).all()  # was -1,099,511,617.9 µs


@pytest.mark.slow
def test_ops_before_their_launch_still_give_a_report(tmp_path: Path) -> None:
    """Calls with impossible spans put ratios ≤ 0 in the decision chart: its log axis leaves them off (was a
    ValueError from math.log10)."""
    shift = f'UPDATE {KERNEL} SET start = start - 1099511627776, "end" = "end" - 1099511627776 WHERE rowid % 7 = 0'
    trace = mutate(tmp_path, shift)
    result = subprocess.run([sys.executable, "-m", "traceattr", "report", str(trace), "-o", str(tmp_path / "r.html")],
                            capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "start before the CUDA call that launched them" in result.stderr


@pytest.mark.parametrize("bandwidth", ["1", "-4800000000000", "1e300"])
def test_impossible_gpu_bandwidth_is_ignored_with_a_note(tmp_path: Path, bandwidth: str) -> None:
    from traceattr.analysis.roofline import peak_bandwidth
    from traceattr.trace.loader import load_trace

    trace = load_trace(mutate(tmp_path, f"UPDATE TARGET_INFO_GPU SET memoryBandwidth = {bandwidth}"))
    assert any("memoryBandwidth" in n and "is no GPU's" in n for n in trace.meta.notes), trace.meta.notes
    peak, source = peak_bandwidth(trace.devices)
    assert source.startswith("datasheet") and 1e12 < peak < 1e13  # an H200's, not 1 byte/s


def test_a_repeated_gpu_row_is_said(tmp_path: Path) -> None:
    from traceattr.trace.loader import load_trace

    same = load_trace(mutate(tmp_path, "INSERT INTO TARGET_INFO_GPU SELECT * FROM TARGET_INFO_GPU", name="a.sqlite"))
    assert any("lists GPU 0 in 2 rows (identical)" in n for n in same.meta.notes), same.meta.notes
    assert same.devices.height == 1
    other = mutate(tmp_path, "INSERT INTO TARGET_INFO_GPU SELECT * FROM TARGET_INFO_GPU; "
                             "UPDATE TARGET_INFO_GPU SET smCount = 7 WHERE rowid = 2", name="b.sqlite")  # fmt: skip
    differ = load_trace(other)
    assert any("in 2 rows (that differ): the first is used" in n for n in differ.meta.notes), differ.meta.notes


@pytest.mark.parametrize("bandwidth", ["1e-300", "0.0001", "150", "nan", "-1", "0"])
def test_bandwidth_option_must_be_a_gpus(capsys: pytest.CaptureFixture[str], bandwidth: str) -> None:
    rc, _, err = cli(capsys, "compare", SWEEP, "--bandwidth", bandwidth)
    one_line(rc, err, "--bandwidth must be a GPU's memory bandwidth in TB/s, 0.001 to 100")


# class 2: ranges that never closed
def test_unclosed_ranges_are_left_out_of_calls_with_a_note(tmp_path: Path) -> None:
    _, _, calls = analysed(SWEEP)
    path = mutate(tmp_path, f'UPDATE NVTX_EVENTS SET "end" = NULL WHERE {PUSHPOP} AND rowid % 13 = 0')
    notes, _, some = analysed(path)
    assert any("30 of 400 NVTX ranges never closed" in n for n in notes), notes
    kept = calls.filter(pl.col("call_id").is_in(some["call_id"].implode()))
    assert 0 < some.height < calls.height
    assert some["gpu_span_ns"].to_list() == kept["gpu_span_ns"].to_list()  # no call ends where the trace does


@pytest.mark.slow
def test_every_range_unclosed_is_refused_by_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = mutate(tmp_path, f'UPDATE NVTX_EVENTS SET "end" = NULL WHERE {PUSHPOP}')
    rc, _, err = cli(capsys, "compare", path)
    one_line(rc, err, "every NVTX range with GPU work (399) never closed (no end time")
    rc, out, err = cli(capsys, "attribute", path)  # the attribution still stands, said
    assert rc == 0 and "400 of 400 NVTX ranges never closed" in out + err


# class 9: graphs said traced whole, hard links, a -wal beside a fresh export
def test_graph_mode_in_metadata_but_node_rows_is_not_traced_whole(tmp_path: Path) -> None:
    from traceattr.trace.loader import load_trace

    path = mutate(tmp_path, "UPDATE META_DATA_CAPTURE SET value = 'Graph' WHERE name LIKE '%GRAPH_TRACE_OPTIONS:MODE'",
                  source=LEVERS)  # fmt: skip
    trace = load_trace(path)
    assert trace.meta.graph_trace_mode == "graph" and trace.meta.graph_launches > 0
    assert not trace.meta.graph_nodes_hidden
    assert not any("traced whole" in n for n in trace.meta.notes), trace.meta.notes


def test_a_hard_link_is_one_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "reports"
    folder.mkdir()
    shutil.copyfile(SWEEP, folder / "a.sqlite")
    os.link(folder / "a.sqlite", folder / "b.sqlite")
    os.symlink(folder / "a.sqlite", folder / "c.sqlite")
    rc, _, err = cli(capsys, "attribute", folder, "-o", tmp_path / "out", "-f", "csv")
    assert rc == 0, err
    assert "2 trace(s) are hard links to one already listed" not in err  # a symlink is no hard link
    assert "1 trace(s) are hard links to one already listed" in err, err
    assert "trace" not in pl.read_csv(tmp_path / "out" / "ranges.csv").columns  # one report, not a combined two


@pytest.mark.slow
def test_a_stale_wal_beside_a_fresh_exports_name_is_avoided(tmp_path: Path) -> None:
    script = tmp_path / "nsys"
    script.write_text(f"#!{sys.executable}\nimport shutil, sys\n"
                      f"shutil.copyfile({str(SWEEP)!r}, sys.argv[sys.argv.index('--output') + 1])\n")  # fmt: skip
    script.chmod(0o755)
    rep = tmp_path / "x.nsys-rep"
    rep.write_bytes(b"raw capture")
    wal = tmp_path / "x.sqlite-wal"  # left by a sqlite3 session on an earlier x.sqlite, since deleted
    wal.write_bytes(b"\x37\x7f\x06\x82" + bytes(4092))
    env = {**os.environ, "TRACEATTR_NSYS": str(script)}
    result = subprocess.run([sys.executable, "-m", "traceattr", "attribute", rep], capture_output=True, text=True,
                            env=env, timeout=120, check=False)  # fmt: skip
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "x.sqlite-wal beside it" in result.stderr
    assert not (tmp_path / "x.sqlite").exists() and wal.read_bytes()[:4] == b"\x37\x7f\x06\x82"
    assert len(list(tmp_path.glob("x.*.sqlite"))) == 1
