"""compare given a record that is not a trace says which command reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import cli, one_line

EAGER = Path(__file__).parents[1] / "examples" / "sweeps" / "h200_q8_fa3_flashmla_eager.json"


def test_a_sweep_record_points_at_report_and_dispatch(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = cli(capsys, "compare", EAGER)
    line = one_line(rc, err, str(EAGER), "traceattr report", "traceattr dispatch")
    assert out == "" and "SQLite" not in line
