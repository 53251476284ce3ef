"""The command line as a user meets it: outputs, formats and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from tests.helpers import run
from traceattr.attribution.engine import OP_COLUMNS, RANGE_COLUMNS


@pytest.mark.slow
def test_terminal_table(exports: dict[str, Path]) -> None:
    out = run("attribute", str(exports["h200_torch_tiny"]))
    assert out.returncode == 0, out.stderr
    # per call series: traceattr:call:0, :1, … add up under traceattr:call; --ranges lists each
    assert "│ traceattr:call " in out.stdout and "traceattr:call:0" not in out.stdout and "[unattributed]" in out.stdout
    assert "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT" in out.stdout
    assert "traceattr:call:0" in run("attribute", str(exports["h200_torch_tiny"]), "--ranges").stdout


@pytest.mark.slow
def test_terminal_summary_per_name_and_ranges_flag(exports: dict[str, Path]) -> None:
    """Like nsys's nvtx_sum: one row per call series (count, total and median GPU span, kernel sum)."""
    out = run("attribute", str(exports["h200_torch_tiny"]))
    assert "GPU time per call series" in out.stdout and "GPU time per NVTX range (µs)" not in out.stdout
    row = next(line for line in out.stdout.splitlines() if "traceattr:matmul_softmax" in line)
    cells = [c.strip() for c in row.split("│")[1:-1]]
    assert cells[:3] == ["traceattr:matmul_softmax", "5", "1,756.2"]  # 5 ranges of that name, their spans summed
    each = run("attribute", str(exports["h200_torch_tiny"]), "--ranges")
    assert "GPU time per NVTX range (µs)" in each.stdout
    assert sum("traceattr:matmul_softmax" in line for line in each.stdout.splitlines()) == 5


@pytest.mark.slow
def test_notes_are_not_markup(exports: dict[str, Path]) -> None:
    out = run("attribute", str(exports["nsysai_h100_2gpu_1s"]))
    assert out.returncode == 0, out.stderr
    assert "(sliced capture): listed as [no launch record]" in out.stderr  # notes on stderr, in every command
    assert "note:" not in out.stdout


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_out_dir_formats(exports: dict[str, Path], tmp_path: Path, fmt: str) -> None:
    out = run("attribute", str(exports["h200_flashinfer_mla"]), "--out", str(tmp_path), "--format", fmt)
    assert out.returncode == 0, out.stderr
    read = {
        "csv": pl.read_csv,
        "json": lambda p: pl.read_json(p, infer_schema_length=None),
        "parquet": pl.read_parquet,
    }[fmt]
    ranges = read(tmp_path / f"ranges.{fmt}")
    kernels = read(tmp_path / f"kernels.{fmt}")
    order = tuple if fmt != "json" else set  # JSON objects carry no column order
    assert order(ranges.columns) == order(RANGE_COLUMNS) and order(kernels.columns) == order(OP_COLUMNS)
    assert ranges.filter(pl.col("name").str.starts_with("probe:")).height == 120
    assert kernels.height == 504
    manifest = json.loads((tmp_path / "attribution.json").read_text())
    assert manifest["outputs"] == [f"ranges.{fmt}", f"kernels.{fmt}"] and manifest["mode"] == "nsys"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


@pytest.mark.slow
def test_csv_to_stdout_and_filters(exports: dict[str, Path]) -> None:
    out = run("attribute", str(exports["h200_flashinfer_mla"]), "--format", "csv", "--match", r"fa3_h128_q1_.*:[0-4]$")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("name,domain,message,style")
    assert sum(1 for line in lines if line.startswith("probe:fa3_h128_q1_ctx131072:")) == 5
    out = run("attribute", str(exports["pipit_saxpy_mpi_a100"]), "--format", "json", "--domain", "MPI")
    assert out.returncode == 0, out.stderr
    names = {r["name"] for r in json.loads(out.stdout)}
    assert names and all(n.startswith("MPI:") or n.startswith("[") for n in names)


@pytest.mark.slow
def test_innermost_mode_counts_each_op_once(exports: dict[str, Path]) -> None:
    out = run("attribute", str(exports["h200_torch_tiny"]), "--format", "json", "--mode", "innermost")
    rows = json.loads(out.stdout)
    assert sum(r["op_records"] for r in rows) == 81


@pytest.mark.slow
def test_user_rules(exports: dict[str, Path], tmp_path: Path) -> None:
    rules = tmp_path / "r.toml"
    rules.write_text('[[rule]]\nrole = "attention"\nfamily = "gemm"\npattern = "nvjet_"\n', encoding="utf-8")
    out = run("attribute", str(exports["h200_torch_tiny"]), "--format", "json", "--rules", str(rules))
    call0 = next(r for r in json.loads(out.stdout) if r["name"] == "traceattr:call:0")
    assert call0["attention_sum_ns"] > 0


def _file(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.slow
@pytest.mark.parametrize(
    ("setup", "needle"),
    [
        (lambda d: d / "missing.sqlite", "no such file"),
        (lambda d: d, "is a directory"),
        (lambda d: _file(d / "e.sqlite", b""), "empty file"),
        (lambda d: _file(d / "t.sqlite", b"SQLite format 2\x00 and then some"), "not an SQLite database"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, setup, needle: str) -> None:
    path = setup(tmp_path)
    out = run("attribute", str(path))
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and str(path) in lines[0]
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_damaged_or_foreign_exports_are_one_line(exports: dict[str, Path], tmp_path: Path) -> None:
    import sqlite3

    data = exports["h200_flashinfer_mla"].read_bytes()
    cut = _file(tmp_path / "cut.sqlite", data[: len(data) // 2])
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE people (name TEXT)")
    no_cuda = tmp_path / "nocuda.sqlite"
    with sqlite3.connect(no_cuda) as conn:
        conn.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).execute("PRAGMA user_version = 1").connection.commit()
    for path, needle in ((cut, "damaged or truncated"), (foreign, "not an nsys export"),
                         (no_cuda, "no CUDA trace"), (empty, "empty SQLite database")):  # fmt: skip
        out = run("attribute", str(path))
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1 and needle in lines[0] and str(path) in lines[0], out.stderr


@pytest.mark.slow
def test_bad_regex_and_rules_are_one_line(exports: dict[str, Path], tmp_path: Path) -> None:
    out = run("attribute", str(exports["h200_torch_tiny"]), "--match", "(")
    assert out.returncode == 2 and "invalid regular expression" in out.stderr and len(out.stderr.splitlines()) == 1
    bad = tmp_path / "bad.toml"
    bad.write_text("[[rule]]\nrole='nope'\npattern='x'\n", encoding="utf-8")
    out = run("attribute", str(exports["h200_torch_tiny"]), "--rules", str(bad))
    assert out.returncode == 2 and "role must be one of" in out.stderr and len(out.stderr.splitlines()) == 1


@pytest.mark.slow
def test_nsys_report_without_nsys(tmp_path: Path) -> None:
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"not really a report")
    out = run("attribute", str(rep), env={"TRACEATTR_NSYS": str(tmp_path / "no-nsys"), "PATH": "/nonexistent"})
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "nsys export --type sqlite" in out.stderr
    assert rep.read_bytes() == b"not really a report"  # the raw capture is never touched


@pytest.mark.slow
def test_parquet_needs_out(exports: dict[str, Path]) -> None:
    out = run("attribute", str(exports["h200_torch_tiny"]), "--format", "parquet")
    assert out.returncode == 2 and "--out" in out.stderr
