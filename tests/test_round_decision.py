"""analysis.round_decision: a round folder is its receipt on every surface (compare, report --format text,
dispatch, --json, --fail-on), and no verdict or rule rests on a row the receipt refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers import BASE, CAND, FakeExecutor, run, timing
from traceattr.analysis.rounds import Row
from traceattr.core.shapes import parse_shape
from traceattr.jobs.round import RoundPlan, run_round

ROWS3 = tuple(Row(s, parse_shape(s).name) for s in ("q1_ctx8k", "q1_ctx131k", "q1_ctx512k"))


def _round_timing():  # type: ignore[no-untyped-def]
    """The candidate 20% faster at 8k; at 131k the arm that runs first 5% faster (the order gate refuses it);
    25% slower at 512k."""
    fast, odd, slow = (
        timing(0.8, noise=0.001),
        timing(1.1, first_bias=0.05, noise=0.001, seed=1),
        timing(1.25, noise=0.001, seed=2),
    )
    pick = {ROWS3[0].shape: fast, ROWS3[1].shape: odd, ROWS3[2].shape: slow}
    return lambda shape, arm, i, pos: pick[shape](shape, arm, i, pos)


@pytest.fixture(scope="module")
def round_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("round")
    plan = RoundPlan(rows=ROWS3, baseline=BASE, candidate=CAND, folder=tmp / "round")
    receipt = run_round(plan, FakeExecutor(tmp, _round_timing(), name="trace.sqlite", rows=ROWS3))
    assert receipt.final["status"].to_list() == ["pass", "refused", "pass"]
    return plan.folder


@pytest.mark.slow
def test_compare_on_a_round_folder_leads_with_its_receipt(round_folder: Path, tmp_path: Path) -> None:
    refused = ROWS3[1].shape
    done = run("compare", str(round_folder), "--json", str(tmp_path / "d.json"))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.index("Round receipt") < out.index("Verdict") and "2 / 3 rows pass" in out
    assert "refused: directional" in out and f"{refused}  refused by the round's gates" in " ".join(out.split("\n"))
    # the family's line runs through the passing rows only: candidate below, baseline above, bracket 8k–512k
    assert f"{CAND} below ≈" in out and "measured at 8k and 512k" in out
    assert f"{refused}  {CAND} wins" not in out and f"{refused}  {BASE} wins" not in out
    doc = json.loads((tmp_path / "d.json").read_text(encoding="utf-8"))
    (fam,) = doc["families"]
    assert refused not in [p["shape"] for p in fam["points"]] and fam["measured_ctx"] == [8000, 512000]
    # one of its captures says the same, then that capture's numbers without verdicts of its own
    capture = next(p for p in sorted(round_folder.iterdir()) if p.is_dir())
    done = run("compare", str(capture))
    assert done.returncode == 0, done.stderr
    assert "Round receipt" in done.stdout and "not shown (refused by the round)" in done.stdout
    assert "★" not in done.stdout


@pytest.mark.slow
def test_report_text_dispatch_and_the_gate_on_a_round(round_folder: Path, tmp_path: Path) -> None:
    text = run("report", str(round_folder), "--format", "text")
    assert text.returncode == 0, text.stderr
    assert "Round receipt" in text.stdout and "2 / 3 rows pass" in text.stdout
    table = run("dispatch", str(round_folder), "-o", str(tmp_path / "t.json"))
    assert table.returncode == 0, table.stderr
    doc = json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))
    assert [s["backend"] for s in doc["families"][0]["dispatch"]] == [CAND, BASE]
    gate = run("compare", str(round_folder), "--fail-on", "refused")
    assert gate.returncode == 3 and f"the round refused {ROWS3[1].shape}" in gate.stderr
    assert run("compare", str(round_folder), "--fail-on", f"loses:{BASE}").returncode == 3  # it loses at 8k


@pytest.mark.slow
def test_diff_of_a_round_leads_with_its_receipt(round_folder: Path) -> None:
    captures = sorted(str(p) for p in round_folder.iterdir() if p.is_dir())
    done = run("diff", captures[0], captures[1])
    assert done.returncode == 0, done.stderr
    assert done.stdout.index("Round receipt") < done.stdout.index("GPU kernel time")
    assert "2 / 3 rows pass" in done.stdout


@pytest.mark.slow
def test_the_shipped_round_folder_reads_as_its_receipt(tmp_path: Path) -> None:
    # examples/rounds/h200_smoke_fa2_vs_fa3: a real two-capture round from the H200, so README's commands run
    folder = Path(__file__).parents[1] / "examples" / "rounds" / "h200_smoke_fa2_vs_fa3"
    text = run("report", str(folder), "--format", "text")
    assert text.returncode == 0, text.stderr
    assert "1 / 2 rows pass" in text.stdout and "directional 0.0201 > 0.02" in text.stdout
    page = run("report", str(folder), "-o", str(tmp_path / "round.html"))
    assert page.returncode == 0 and (tmp_path / "round.html").stat().st_size > 0, page.stderr


@pytest.mark.slow
def test_a_refused_row_has_no_verdict_on_any_surface(tmp_path: Path) -> None:
    # the receipt's markdown, its page and the terminal word a refused attempt alike: no verdict, the gates say why
    from traceattr.jobs.round import read_receipt
    from traceattr.present.receipt import markdown

    folder = Path(__file__).parents[1] / "examples" / "rounds" / "h200_smoke_fa2_vs_fa3"
    receipt = read_receipt(folder)
    md_row = next(line for line in markdown(receipt).splitlines() if line.startswith("| q1_ctx8k"))
    assert md_row.split("|")[5].strip() == "—" and "**refused**" in md_row
    text = run("report", str(folder), "--format", "text", env={**os.environ, "COLUMNS": "160"})
    line = next(line for line in text.stdout.splitlines() if "q1_ctx8k" in line and "refused" in line)
    assert "—" in line and "slower" not in line
    page = run("report", str(folder), "-o", str(tmp_path / "r.html"))
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert page.returncode == 0 and "<td>q1_ctx8k</td>" in html
    cells = html.split("<td>q1_ctx8k</td>", 1)[1].split("</tr>", 1)[0]
    assert ">—<" in cells and ">slower<" not in cells
