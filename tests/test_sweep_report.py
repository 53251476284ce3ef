"""The report of a sweep (``traceattr report SWEEP_FOLDER`` or its sweep.json): the answer first, the bisection on
the decision chart, the regret table of its dispatch table, metadata folded; from sweep.json alone."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest

from tests.helpers import FakeSweep, json_strings, linear_time, page_figures, run, sweep_plan, without_plotlyjs
from traceattr.analysis.dispatch_table import dispatch_table
from traceattr.analysis.sweep_points import dispatch_frames
from traceattr.core.records import SweepRecord
from traceattr.jobs.sweep import run_sweep
from traceattr.present.formats import sweep_text
from traceattr.present.report.sweep import sweep_figure, sweep_page

SWEEPS = Path(__file__).parents[1] / "examples" / "sweeps"
EAGER = SWEEPS / "h200_q8_fa3_flashmla_eager.json"
GRAPHS = SWEEPS / "h200_q8_fa3_flashmla_graphs.json"


def _text(page: str) -> str:
    """The page's visible words, roughly: tags dropped, entities read."""
    ours = without_plotlyjs(page)
    ours = re.sub(r"<script\b.*?</script>", " ", ours, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", ours))


@pytest.fixture(scope="module")
def eager_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("eager") / "eager.html"
    done = run("report", str(EAGER), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote {out} (")
    return out.read_text(encoding="utf-8")


@pytest.mark.slow
def test_sections_in_order_the_answer_first(eager_page: str) -> None:
    assert re.findall(r'<section id="([\w-]+)">', eager_page) == ["answer", "sweep", "dispatch", "metadata"]
    assert list(page_figures(eager_page)) == ["fig-sweep"]
    record = SweepRecord.read(EAGER)
    text = _text(eager_page)
    answer = sweep_text(record.header, record.result)
    assert (
        answer == "q8_ctx* (eager): the step budget ran out (6 captures); the crossover lies in 138k–170k (154k ±10.4%)"
    )
    # the answer before the chart and any table; then what this traceattr says of the record's points
    assert text.index(answer) < text.index("Each measured context:") < text.index("The table `traceattr dispatch`")
    assert "on its points the sweep now says: q8_ctx* (eager): the step budget ran out (6 captures); the " \
           "crossover lies in 138k–170k (154k ±10.4%, asked ±10%) (medians cross at ≈163k); 153k was refused " \
           "(directional 0.0234 > 0.02) and not measured again" in text  # fmt: skip
    assert "flashmla's median falls from 117.7 µs at 138k to 103.0 µs at 170k" in text
    # metadata last, folded
    metadata = eager_page[eager_page.index('<section id="metadata">') :]
    assert "<details open>" not in metadata and "directional_limit" in metadata


def test_the_bisection_on_the_decision_chart() -> None:
    record = SweepRecord.read(EAGER)
    fig = sweep_figure(record).to_plotly_json()
    by_side = {t["meta"]: t for t in fig["data"]}
    assert set(by_side) == {"below", "above", "refused"}
    # every measured ctx a point of the ratio with its interval, labelled with its step
    assert list(by_side["below"]["x"]) == [32_000, 73_800, 112_000, 138_000]
    assert list(by_side["below"]["text"]) == ["1", "3", "4", "5"]
    assert list(by_side["above"]["text"]) == ["1", "2"] and list(by_side["above"]["x"]) == [900_000, 170_000]
    refused = by_side["refused"]
    assert list(refused["x"]) == [153_000] and list(refused["text"]) == ["6"] and refused["marker"]["symbol"] == "x"
    assert refused["error_y"]["array"][0] == pytest.approx(0.9752 - 0.9659, abs=1e-3)
    assert "refused: directional 0.0234 &gt; 0.02" in refused["hovertext"][0]
    # the bracket shaded, labelled with its width
    rects = [s for s in fig["layout"]["shapes"] if s.get("fillcolor") == "rgba(26,127,55,0.12)"]
    assert [(r["x0"], r["x1"]) for r in rects] == [(138_000, 170_000)]
    assert any(a.get("text") == "bracket 138k–170k (±10.4%)" for a in fig["layout"]["annotations"])
    assert fig["layout"]["xaxis"]["type"] == "log" and fig["layout"]["yaxis"]["type"] == "log"


def test_the_regret_table_is_the_dispatch_tables(eager_page: str) -> None:
    (fam,) = dispatch_table(*dispatch_frames(SweepRecord.read(EAGER))).families
    section = eager_page[eager_page.index('<section id="dispatch">') : eager_page.index('<section id="metadata">')]
    rows = {m[0]: m[1:] for m in re.findall(r"<tr><td>([^<]+)</td><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td></tr>",
                                            section)}  # fmt: skip
    assert rows["leave-one-out"] == ("1.1%", "6.4%", "5 / 6")
    assert rows["always fa3"] == ("2.8%", "10.5%", "4 / 6") and rows["always flashmla"] == ("9.5%", "26.7%", "2 / 6")
    assert rows["the table, at its own points"] == ("0.0%", "0.0%", "6 / 6")
    assert fam.loo_regret.right == 5 and fam.baselines["fa3"].max == pytest.approx(0.105, abs=1e-3)
    assert "fa3 &lt;163k, flashmla ≥163k (95%)" in section
    assert "<td>170k</td><td>q8_ctx170k_h16_b1_bf16_p64</td><td>flashmla</td>" in section  # the held-out miss
    assert "Graph-safe" in section and "flashmla, 144.4 µs" in section


@pytest.mark.slow
def test_a_fresh_search_reads_as_itself(tmp_path: Path) -> None:
    record = run_sweep(sweep_plan(tmp_path), FakeSweep(linear_time, low_clock=((1, 8000),)))
    page = sweep_page(record, "fresh").decode()
    text = _text(page)
    assert sweep_text(record.header, record.result) in text
    assert "earlier traceattr" not in text  # its answer is what its points say
    fig = page_figures(page)["fig-sweep"]
    refused = next(t for t in fig["data"] if t["meta"] == "refused")
    assert refused["x"] == [8000] and refused["text"] == ["1"]  # the low end, refused at step 1 …
    assert 8000 in next(t for t in fig["data"] if t["meta"] == "below")["x"]  # … and passed at step 2


@pytest.mark.slow
def test_the_graphs_record_says_what_its_points_say(tmp_path: Path) -> None:
    out = tmp_path / "g.html"
    assert run("report", str(GRAPHS), "-o", str(out)).returncode == 0
    text = _text(out.read_text(encoding="utf-8"))
    assert "not finished: 32k was refused (directional 0.0292 > 0.02) and is measured again next" in text
    assert "One measured context passed its gates (900k)" in text


@pytest.mark.slow
def test_sweep_folder_cli_and_errors(tmp_path: Path) -> None:
    folder = tmp_path / "20261201_sweep_q8_ctxx_eager"
    folder.mkdir()
    shutil.copy(EAGER, folder / "sweep.json")
    done = run("report", str(folder))
    assert done.returncode == 0, done.stderr
    target = folder / "report.html"
    assert done.stdout.strip() == f"wrote {target} ({target.stat().st_size / 1e6:.1f} MB)"
    assert "<title>traceattr sweep 20261201_sweep_q8_ctxx_eager</title>" in target.read_text(encoding="utf-8")
    bad = run("report", str(folder), "--match", "fa3")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--match" in bad.stderr
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "traceattr.search/1", "command": "round"}), encoding="utf-8")
    bad = run("report", str(other))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "not a traceattr sweep record" in bad.stderr


def test_hostile_arm_labels_stay_text(tmp_path: Path) -> None:
    evil = "fa3<script>alert(1)</script>"
    record = SweepRecord.from_json(json.loads(EAGER.read_text(encoding="utf-8").replace('"fa3"', json.dumps(evil))))
    page = sweep_page(record, "hostile").decode()
    assert "<script>alert" not in without_plotlyjs(page).lower()
    assert "fa3&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert any("fa3&lt;script&gt;" in s for s in json_strings(page_figures(page)["fig-sweep"]))


@pytest.mark.parametrize(
    ("result", "sentence", "fills"),
    [
        ({"kind": "several crossovers", "crossings": [[32_000, 73_800], [73_800, 170_000]]},
         "the really faster of fa3 and flashmla changes 2 times along ctx (between 32k–74k, 74k–170k): several "
         "crossovers, not one bracket", ["rgba(230,120,0,0.16)"] * 2),
        ({"kind": "tie band", "bracket": [112_000, 170_000], "band": [138_000, 153_000]},
         "fa3 vs flashmla: tie within ±1% (same) at 138k–153k; fa3 really faster at 112k, flashmla at 170k",
         ["rgba(26,127,55,0.12)", "rgba(120,120,120,0.18)"]),
        ({"kind": "crossover", "bracket": [138_000, 153_000], "swapped": True},
         "flashmla below, fa3 above a crossover in 138k–153k (146k ±5%)", ["rgba(26,127,55,0.12)"]),
        ({"kind": "no crossover", "ends": ["above", "above"]},
         "no change of the really faster arm over 32k–900k: flashmla really faster at 32k, flashmla really faster "
         "at 900k: no crossover", []),
        ({"kind": "no crossover", "ends": ["same", "above"]},
         "no change of the really faster arm over 32k–900k: the same (within ±1%) at 32k, flashmla really faster "
         "at 900k: no crossover", []),
        ({"kind": "refused", "refused": {"ctx": 153_000, "cause": "parity"}, "bracket": [138_000, 170_000]},
         "153k was refused twice by its gates (parity); the crossover lies in 138k–170k (154k ±10.4%)",
         ["rgba(26,127,55,0.12)"]),
    ],
)  # fmt: skip
def test_every_answer_reads_and_shades(result: dict, sentence: str, fills: list[str]) -> None:
    record = SweepRecord.read(EAGER)
    record = SweepRecord(record.header, record.steps, result)
    assert sweep_text(record.header, result) == f"q8_ctx* (eager): {sentence}"
    shapes = sweep_figure(record).to_plotly_json()["layout"].get("shapes", [])
    assert [s["fillcolor"] for s in shapes if s.get("type") == "rect" and s.get("xref") == "x"] == fills


@pytest.mark.slow
def test_the_shipped_sweep_folder_reads_as_its_record(tmp_path: Path) -> None:
    # examples/sweeps/h200_q8_eager: the H200 eager sweep's record as a sweep folder holds it (sweep.json)
    folder = Path(__file__).parents[1] / "examples" / "sweeps" / "h200_q8_eager"
    assert SweepRecord.read(folder / "sweep.json").result == SweepRecord.read(EAGER).result
    done = run("report", str(folder), "-o", str(tmp_path / "sweep.html"))
    assert done.returncode == 0 and (tmp_path / "sweep.html").stat().st_size > 0, done.stderr
