"""dispatch --format: the table's rows as CSV, or its document as JSON, on stdout; "wrote" on stderr."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from tests.helpers import SWEEP, cli

SWEEPS = Path(__file__).parents[1] / "examples" / "sweeps"


def test_csv_is_one_row_per_family_and_segment(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = cli(capsys, "dispatch", SWEEP, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rc == 0 and [r["backend"] for r in rows] == ["fa3", "flashmla"]
    assert rows[0]["ctx_to"] == rows[1]["ctx_from"] and rows[0]["ctx_from"] == "" and rows[1]["ctx_to"] == ""


def test_csv_of_two_modes_says_the_mode(capsys: pytest.CaptureFixture[str]) -> None:
    eager, graphs = SWEEPS / "h200_q8_fa3_flashmla_eager_lead.json", SWEEPS / "h200_q8_fa3_flashmla_graphs_lead.json"
    rc, out, _ = cli(capsys, "dispatch", eager, graphs, "-f", "csv")
    assert rc == 0 and {r["mode"] for r in csv.DictReader(io.StringIO(out))} == {"eager", "graphs"}


def test_json_is_the_document_and_wrote_goes_to_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "table.json"
    rc, out, err = cli(capsys, "dispatch", SWEEP, "-f", "json", "-o", target)
    assert rc == 0 and json.loads(out) == json.loads(target.read_text(encoding="utf-8"))
    assert json.loads(out)["schema"] == "traceattr.dispatch/2" and err.strip() == f"wrote {target}"
