"""``traceattr dispatch EAGER GRAPHS``: both tables side by side, where the choice flips, the regret of shipping the
eager table under graphs (traceattr.dispatch-modes/1); on the H200 q8 sweeps and on constructed run folders whose
choice does flip."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from rich.cells import cell_len

from tests.helpers import run, sweep
from traceattr.runtime.dispatcher import TableModeRefused, family_for
from traceattr.runtime.table import FamilyKey, parse_table

SWEEPS = Path(__file__).resolve().parent.parent / "examples" / "sweeps"
EAGER = SWEEPS / "h200_q8_fa3_flashmla_eager_lead.json"
GRAPHS = SWEEPS / "h200_q8_fa3_flashmla_graphs_lead.json"
CTX = (8, 32, 64, 131, 256, 512, 900)


@pytest.mark.slow
def test_the_h200_q8_sweeps_side_by_side(tmp_path: Path) -> None:
    """The numbers examples/decode/README.md states: no flip at a measured ctx, 419 tokens between the two
    tables' breakpoints, 0.0% regret for the eager table at the seven graphs points."""
    out = tmp_path / "modes.json"
    done = run("dispatch", str(EAGER), str(GRAPHS), "-o", str(out), env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    assert max(cell_len(line) for line in done.stdout.splitlines()) <= 80
    assert "│ 151,390–151,809 │ flashmla    │ fa3            │ flips │" in done.stdout
    assert "flips at ctx measured in both: none of 7" in done.stdout
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["schema"] == "traceattr.dispatch-modes/1"
    (fam,) = doc["families"]
    assert fam["family"] == "q8_ctx*" and fam["flips"] == []
    (flip,) = fam["flip_ranges"]
    assert {k: flip[k] for k in ("ctx_from", "ctx_to", "eager", "graphs", "graphs_measured")} == {
        "ctx_from": 151_390, "ctx_to": 151_809, "eager": "flashmla", "graphs": "fa3", "graphs_measured": []}  # fmt: skip
    assert flip["interpolated_max"] == pytest.approx(0.0071, abs=1e-4)
    shipped = fam["regret_under_graphs"]["eager_table"]
    assert (shipped["mean"], shipped["max"], shipped["right"], shipped["shapes"]) == (0.0, 0.0, 7, 7)
    # each embedded table is the one `traceattr dispatch` writes for that sweep alone, now saying its mode
    for mode, path in (("eager", EAGER), ("graphs", GRAPHS)):
        alone = tmp_path / f"{mode}.json"
        assert run("dispatch", str(path), "-o", str(alone)).returncode == 0
        one = json.loads(alone.read_text(encoding="utf-8"))
        assert one["mode"] == doc[mode]["mode"] == mode
        assert one["families"] == doc[mode]["families"]
    # the dispatcher loads the graphs table, and refuses the eager one under graphs unless told
    key = FamilyKey(q=8, heads=16, batch=1)
    assert [s.arm for s in family_for(parse_table(doc["graphs"]), key).segments] == ["fa3", "flashmla"]
    with pytest.raises(TableModeRefused, match="measured eager"):
        family_for(parse_table(doc["eager"]), key)
    assert family_for(parse_table(doc["eager"]), key, allow_other_mode=True).segments[1].ctx_from == 151_390


def _run_folder(root: Path, name: str, flashmla_base: float, graphs: bool) -> Path:
    folder = root / name
    folder.mkdir()
    times = {f"q8_ctx{c}k": {"fa3": 25 + 0.45 * c, "flashmla": flashmla_base + 0.39 * c} for c in CTX}
    sweep(folder / "trace.sqlite", times)
    (folder / "runner.json").write_text(json.dumps({"protocol": {"graphs": graphs}}), encoding="utf-8")
    return folder


@pytest.mark.slow
def test_run_folders_whose_choice_flips(tmp_path: Path) -> None:
    """Eager: fa3 up to ≈183k; with graphs flashmla's fixed cost is 6 µs lower, so it wins from ≈83k: at 131k the
    eager table ships fa3 where flashmla is 3.5% faster."""
    eager = _run_folder(tmp_path, "eager", 36.0, graphs=False)
    graphs = _run_folder(tmp_path, "graphs", 30.0, graphs=True)
    out = tmp_path / "modes.json"
    done = run("dispatch", str(eager), str(graphs), "-o", str(out), env={"COLUMNS": "100"})
    assert done.returncode == 0, done.stderr
    assert max(cell_len(line) for line in done.stdout.splitlines()) <= 100
    (fam,) = json.loads(out.read_text(encoding="utf-8"))["families"]
    assert [(f["ctx"], f["eager"], f["graphs"], f["eager_decided"], f["graphs_decided"]) for f in fam["flips"]] == [
        (131_000, "fa3", "flashmla", True, True)]  # fmt: skip
    (flip,) = fam["flip_ranges"]
    assert (flip["eager"], flip["graphs"], flip["graphs_measured"]) == ("fa3", "flashmla", [131_000])
    assert 64_000 < flip["ctx_from"] < 131_000 < 183_000 < flip["ctx_to"] < 256_000  # both breakpoints moved past it
    at_131k = (25 + 0.45 * 131) / (30 + 0.39 * 131) - 1  # t_graphs(fa3) / t_graphs(flashmla) − 1
    regret = fam["regret_under_graphs"]["eager_table"]
    assert regret["max"] == pytest.approx(at_131k, abs=0.003) and (regret["right"], regret["shapes"]) == (6, 7)
    assert regret["mean"] == pytest.approx(at_131k / 7, abs=0.001)
    assert fam["regret_under_graphs"]["graphs_table"]["max"] == 0.0
    assert "131,000 (eager fa3, graphs flashmla)" in done.stdout
    # a third input whose mode nothing states cannot be placed: refused, naming it
    plain = tmp_path / "plain"
    shutil.copytree(graphs, plain)
    (plain / "runner.json").unlink()
    refused = run("dispatch", str(eager), str(graphs), str(plain))
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert f"{plain}: no runner.json says whether it ran eager or with --graphs" in refused.stderr
