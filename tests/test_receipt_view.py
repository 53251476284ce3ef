"""present.receipt_view: a round's receipt on the terminal gives way as compare's tables do."""

from __future__ import annotations

from pathlib import Path

from rich.cells import cell_len
from rich.console import Console

from traceattr.jobs.round import read_receipt
from traceattr.present.receipt_view import render_receipt

ROUND = Path(__file__).parents[1] / "examples" / "rounds" / "h200_smoke_fa2_vs_fa3"


def _receipt_at(width: int) -> str:
    con = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115 (closed below)
    render_receipt(read_receipt(ROUND), con)
    con.file.close()
    return con.export_text()


def test_the_medians_give_way_before_the_table_becomes_records() -> None:
    # the shipped round's table is 110 columns wide: at 100 the candidate's median goes (and is named), at 80 the
    # baseline's too; the ratio, the verdict and the gates stay, in a table
    wide = _receipt_at(200)
    assert "candidate µs" in wide and "not shown" not in wide
    at_100 = _receipt_at(100)
    assert "┃ row" in at_100 and "baseline µs" in at_100 and "1.469× [1.460–1.478]" in at_100
    assert "not shown at 100 columns: candidate µs (--wide" in at_100
    at_80 = _receipt_at(80)
    assert "┃ row" in at_80 and "not shown at 80 columns: candidate µs, baseline µs (--wide" in at_80
    assert "refused: directional 0.0201 >" in at_80
    for width, text in ((100, at_100), (80, at_80)):
        assert max(cell_len(line) for line in text.splitlines()) <= width


def test_below_the_primary_columns_every_column_is_a_record() -> None:
    at_50 = _receipt_at(50)
    assert "┃" not in at_50 and "  candidate µs: 33.63" in at_50 and "  baseline µs: 24.77" in at_50
