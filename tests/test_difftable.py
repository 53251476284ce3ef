"""diff --format csv|json: diff.csv's rows on stdout, no table."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from tests.helpers import SWEEP, cli


@pytest.mark.parametrize("form", ["csv", "json"])
def test_diff_rows_on_stdout(form: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, out, _ = cli(capsys, "diff", SWEEP, SWEEP, "--format", form, "-o", tmp_path / "d")
    assert rc == 0 and "┏" not in out
    rows = list(csv.DictReader(io.StringIO(out))) if form == "csv" else json.loads(out)
    written = list(csv.DictReader(io.StringIO((tmp_path / "d" / "diff.csv").read_text(encoding="utf-8"))))
    assert len(rows) == len(written) > 0 and {r["level"] for r in rows} >= {"total", "kernel"}
