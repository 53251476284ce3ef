"""The decode receipt's page (``traceattr report DECODE_FOLDER`` or NAME.json): it opens on the answer, its numbers
are the receipt's, the trajectory figure draws every contender per step with the dispatcher's choices marked; bad
receipts and ambiguous folders are refused in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers import page_figures, run
from traceattr.jobs.decode import result_from_json
from traceattr.jobs.decode_report import MISS_COLOR, decode_page
from traceattr.present.report.style import backend_colors

DECODE = Path(__file__).resolve().parent.parent / "examples" / "decode"
RECEIPTS = sorted(DECODE.glob("*.json"))


def _iv(v: dict[str, float]) -> str:
    return f"{v['value']:,.1f} [{v['lo']:,.1f}, {v['hi']:,.1f}]"


def _pct(v: dict[str, float]) -> str:
    return f"{v['value']:+.2%} [{v['lo']:+.2%}, {v['hi']:+.2%}]"


def _body(page: str) -> str:
    return page[page.index("<body>") :]  # after plotly.js, which holds every word under the sun


@pytest.mark.slow
def test_the_q8_grow_page_opens_on_the_answer(tmp_path: Path) -> None:
    out = tmp_path / "q8.html"
    done = run("report", str(DECODE / "q8_grow.json"), "-o", str(out))
    assert done.returncode == 0, done.stderr
    page = out.read_text(encoding="utf-8")
    body = _body(page)
    # the first section is the answer, and it leads with the receipt's numbers (examples/decode/README.md)
    assert body.index("<section ") == body.index('<section id="answer">')
    lead = body[body.index('<ul class="rules"><li><b>') :].split("</b>")[0]
    assert "Dispatcher 4,593.4 µs" in lead and "best fixed arm fa3 4,662.1 µs" in lead
    assert "gain +1.47% [+1.02%, +2.10%]" in lead and "oracle +0.71% [+0.05%, +1.15%]" in lead
    assert "1 switch;" in lead and "37/40 steps" in lead
    doc = json.loads((DECODE / "q8_grow.json").read_text(encoding="utf-8"))
    totals = doc["summary"]["totals_us"]
    for label in ("fa3", "flashmla", "dispatch"):
        assert f"<td>{label}</td><td>{_iv(totals[label])}</td>" in body
    assert f"<td>{_iv(doc['summary']['oracle_us'])}</td>" in body
    assert f"<td>{_pct(doc['summary']['gain_over']['flashmla'])}</td>" in body  # +13.16% over always-flashmla
    assert "<td>fa3 824, flashmla 11</td>" in body and "<td>fa3 1,309, flashmla 119</td>" in body  # re-plan µs
    assert "<td>150</td>" in body  # the dispatcher's two graphs, MiB, as the receipt's markdown states
    assert "fa3 &lt; 385,048, flashmla ≥ 385,048" in body
    assert "Not drawn: the receipt holds each call" in body  # the timeline: what is missing, said


def test_the_trajectory_figure_marks_the_choices() -> None:
    doc = json.loads((DECODE / "q8_grow.json").read_text(encoding="utf-8"))
    fig = page_figures(decode_page(result_from_json(doc), "t").decode())["fig-trajectory"]
    by = {t["meta"]: t for t in fig["data"]}
    assert list(by) == ["fa3", "flashmla", "dispatch"]
    steps = doc["per_step"]  # a grow trajectory: already by ctx
    assert by["dispatch"]["x"] == [p["ctx"] for p in steps]
    assert by["dispatch"]["y"] == pytest.approx([p["dispatch_us"] for p in steps])
    assert by["fa3"]["y"] == pytest.approx([p["fa3_us"] for p in steps])
    colors = backend_colors(["fa3", "flashmla"])
    assert by["dispatch"]["marker"]["color"] == [colors[p["chosen"]] for p in steps]
    rings = by["dispatch"]["marker"]["line"]["color"]
    missed = [p["ctx"] for p, c in zip(steps, rings, strict=True) if c == MISS_COLOR]
    assert missed == [343_246, 436_782, 492_714]  # the three misses the README names
    assert fig["layout"]["xaxis"]["type"] == "log"
    assert [s["x0"] for s in fig["layout"]["shapes"]] == [385_048]  # the table's breakpoint


@pytest.mark.parametrize("receipt", RECEIPTS, ids=[p.stem for p in RECEIPTS])
def test_every_shipped_receipt_renders(receipt: Path) -> None:
    doc = json.loads(receipt.read_text(encoding="utf-8"))
    page = decode_page(result_from_json(doc), receipt.stem).decode()
    body = _body(page)
    total = doc["summary"]["totals_us"]["dispatch"]["value"]
    assert body.index(f"Dispatcher {total:,.1f} µs") < body.index('id="trajectory"')
    assert f"gain {_pct(doc['summary']['gain_over_best_fixed'])}" in body
    for label, other in doc["other_rules"].items():  # q8_b4_mix*: the mean rule beside max
        assert f"<td>{_iv(other['total_us'])}</td>" in body
        assert label in {t["meta"] for t in page_figures(page)["fig-trajectory"]["data"]}


@pytest.mark.slow
def test_folders_and_bad_receipts(tmp_path: Path) -> None:
    one = tmp_path / "one"
    one.mkdir()
    shutil.copy(DECODE / "q8_nsys.json", one / "q8_nsys.json")
    done = run("report", str(one))
    assert done.returncode == 0, done.stderr
    assert "Dispatcher 1,043.6 µs" in (one / "report.html").read_text(encoding="utf-8")
    two = tmp_path / "two"
    shutil.copytree(one, two)
    shutil.copy(DECODE / "q1_grow.json", two / "q1_grow.json")
    many = run("report", str(two))
    assert many.returncode == 2 and many.stderr.count("\n") == 1, many.stderr
    assert "holds 2 decode receipts (q1_grow.json, q8_nsys.json): give one of them" in many.stderr
    doc = json.loads((DECODE / "q8_nsys.json").read_text(encoding="utf-8"))
    del doc["times_us"]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(doc), encoding="utf-8")
    bad = run("report", str(broken))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert f"{broken}: not a readable decode receipt (KeyError: 'times_us')" in bad.stderr
    doc = json.loads((DECODE / "q8_nsys.json").read_text(encoding="utf-8"))
    doc["summary"]["totals_us"]["dispatch"]["value"] += 5.0  # a receipt whose stored total is not its times'
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc), encoding="utf-8")
    wrong = run("report", str(edited))
    assert wrong.returncode == 2 and "differs from the stored" in wrong.stderr, wrong.stderr


def _views(page: str) -> list[str]:
    return [v["title"] for v in page_figures(page)["fig-timeline"]["layout"]["meta"]["views"]]


@pytest.mark.slow
def test_the_nsys_export_beside_a_receipt_gives_the_timeline(tmp_path: Path) -> None:
    """examples/decode/q8_nsys.json and its q8_nsys.sqlite.xz: a few steps, each contender's call side by side."""
    out = tmp_path / "nsys.html"
    done = run("report", str(DECODE / "q8_nsys.json"), "-o", str(out))
    assert done.returncode == 0, done.stderr
    page = out.read_text(encoding="utf-8")
    views = _views(page)
    doc = json.loads((DECODE / "q8_nsys.json").read_text(encoding="utf-8"))
    steps = doc["per_step"]
    switch = next(i for i in range(1, len(steps)) if steps[i]["chosen"] != steps[i - 1]["chosen"])
    offered = sorted(int(t.split("step ")[1].split(":")[0]) for t in views)
    assert 0 in offered and len(steps) - 1 in offered and switch in offered and len(offered) <= 6
    fig = page_figures(page)["fig-timeline"]
    lanes = fig["layout"]["meta"]["views"][0]["lanes"]
    assert [lane for lane in lanes if lane.endswith("NVTX")] == ["fa3 │ NVTX", "flashmla │ NVTX", "dispatch │ NVTX"]
    roles = {t["name"] for t in fig["data"] if t["meta"] == 0}
    assert {"attention", "schedule", "reduce"} <= roles  # FlashMLA's three kernels, fa3's one
    assert "the page has no timeline" not in done.stderr
    # the same trace beside another run's receipt is refused as that, and the page still written
    other = tmp_path / "q8_grow.json"
    shutil.copy(DECODE / "q8_grow.json", other)
    shutil.copy(DECODE / "q8_nsys.sqlite.xz", tmp_path / "q8_grow.sqlite.xz")
    mixed = run("report", str(other), "-o", str(tmp_path / "grow.html"))
    assert mixed.returncode == 0, mixed.stderr
    text = _body((tmp_path / "grow.html").read_text(encoding="utf-8"))
    assert "the trace is not this receipt&#x27;s run: 72 timed calls, the receipt 1,200" in text
    # a broken .xz: one line, exit 2
    (tmp_path / "q8_grow.sqlite.xz").write_bytes(b"not xz at all")
    broken = run("report", str(other), "-o", str(tmp_path / "grow.html"))
    assert broken.returncode == 2 and broken.stderr.count("\n") == 1, broken.stderr
    assert "q8_grow.sqlite.xz: not a readable .xz file" in broken.stderr
