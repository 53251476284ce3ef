"""present.report.figures_phases: the page's "Inside the kernel" drawn from the phase record, read back from the
HTML without a browser (the figures as plotly JSON, the tables as text); colours from the palette."""

from __future__ import annotations

import html
from pathlib import Path

import pytest

import traceattr
from tests.helpers import page_figures
from tests.synth.stamped import REDUCE, stamped_folder
from traceattr.phases.report import PhaseReport, cta_timeline
from traceattr.present.palette import PHASE_KERNEL, PHASE_KNOWN, phase_boundary, phase_colors
from traceattr.present.phases import bound_text, load, us
from traceattr.present.report import build_report
from traceattr.present.report.figures_phases import CTA_AREA_PX, LANE_PX, LATER_KERNEL


@pytest.fixture(scope="module")
def run_folder(stamped_run: Path) -> Path:
    return stamped_run


@pytest.fixture(scope="module")
def report(run_folder: Path) -> PhaseReport:
    found = load(run_folder)
    assert found is not None
    return found


@pytest.fixture(scope="module")
def page(run_folder: Path, report: PhaseReport) -> str:
    return build_report(traceattr.open(run_folder / "trace.sqlite").attribute(), phases=report)


def test_the_page_has_the_section_after_the_timeline(page: str, report: PhaseReport) -> None:
    figures = page_figures(page)
    assert list(figures)[-2:] == ["fig-phases", "fig-cta"]  # after the timeline, the last figures of the page
    assert page.index('id="timeline"') < page.index('<section id="phases"><h2>Inside the kernel</h2>')
    options = page.split('data-views="fig-cta"')[1].split("</select>")[0]
    assert options.count("<option") == len(report.medians)
    for m in report.medians:  # the numbers the terminal prints, in the folded table
        for p in m.phases:
            assert (
                f"<td>{html.escape(p.phase)}</td><td>{us(p.median_ns)}</td><td>[{us(p.low_ns)}, {us(p.high_ns)}]</td>"
                in page
            )
    for b in report.bounds:
        assert html.escape(bound_text(b)) in page
    assert html.escape(report.alignment.describe()) in page


def test_the_bars_are_the_median_calls_in_palette_colours(page: str, report: PhaseReport) -> None:
    fig = page_figures(page)["fig-phases"]
    bars = [t for t in fig["data"] if t["type"] == "bar"]
    names = [t["name"] for t in bars]
    colors = phase_colors(names)
    for t in bars:
        assert t["marker"]["color"] == colors[t["name"]] == PHASE_KNOWN[phase_boundary(t["name"])]
        assert ("pattern" in t["marker"]) == t["name"].startswith("reduce:")  # the second kernel: hatched
        for label, x, plus, minus in zip(
            t["y"], t["x"], t["error_x"]["array"], t["error_x"]["arrayminus"], strict=True
        ):
            m = next(m for m in report.medians if label.endswith(html.escape(m.arm)) and label.startswith(m.shape))
            p = next(p for p in m.phases if p.phase == t["name"])
            assert x == pytest.approx(p.median_ns / 1e3)
            assert (x + plus, x - minus) == pytest.approx((p.high_ns / 1e3, p.low_ns / 1e3))
    assert sorted(names) == sorted({p.phase for m in report.medians for p in m.phases})
    (span,) = (t for t in fig["data"] if t["type"] == "scatter")
    assert span["x"] == pytest.approx([m.span_ns / 1e3 for m in report.medians])
    assert LATER_KERNEL["shape"] == "/"


def test_the_cta_timeline_has_a_view_per_arm_and_row(page: str, report: PhaseReport) -> None:
    fig = page_figures(page)["fig-cta"]
    views = fig["layout"]["meta"]["views"]
    assert len(views) == len(report.medians)
    for v, m in enumerate(report.medians):
        kernels, phases = cta_timeline(report, m)
        ctas = phases.select("kernel", "cta").unique().height
        assert len(views[v]["lanes"]) == kernels.height + ctas
        lane = min(LANE_PX[1], max(LANE_PX[0], CTA_AREA_PX / ctas))
        assert views[v]["height"] == int(150 + 24 * kernels.height + lane * ctas)  # the figure follows its lanes
        drawn = [t for t in fig["data"] if t["meta"] == v]
        nsys = next(t for t in drawn if t["name"] == "nsys kernel")
        assert nsys["marker"]["color"] == PHASE_KERNEL and nsys["base"][0] == 0
        assert sum(len(t["x"]) for t in drawn if t["name"] != "nsys kernel") == phases.height  # every CTA phase
        for t in drawn:
            if t["name"] != "nsys kernel":
                assert t["marker"]["color"] == PHASE_KNOWN[t["name"]]
        assert all(t["visible"] is (v == 0) for t in drawn)
    heights = {len(v["lanes"]): v["height"] for v in views}
    assert heights[max(heights)] > heights[min(heights)]  # 32 CTAs draw taller than 16


def test_a_page_without_stamps_has_no_such_section(run_folder: Path) -> None:
    page = build_report(traceattr.open(run_folder / "trace.sqlite").attribute())
    assert 'id="phases"' not in page and "fig-cta" not in page


@pytest.mark.slow
def test_hostile_arm_names_are_escaped(tmp_path: Path) -> None:
    evil = "<script>alert(1)</script>[merge=reduce]"
    folder = stamped_folder(tmp_path / "run", (evil,), floors=False).folder
    report = load(Path(folder))
    assert report is not None and report.medians[0].arm == evil
    page = build_report(traceattr.open(Path(folder) / "trace.sqlite").attribute(), phases=report)
    assert "<script>alert(1)" not in page.split("</head>", 1)[1]
    assert REDUCE not in page


@pytest.mark.slow
def test_a_round_without_traces_still_draws_its_phases(tmp_path: Path) -> None:
    """The figures need the stamps and kernels.parquet only: a round whose traces are gone keeps them."""
    from tests.synth.stamped import stamped_round
    from traceattr.jobs.round import read_receipt, write_round_report
    from traceattr.present.phases import load_round

    made = stamped_round(tmp_path / "made", captures=2, report=False)
    folder = made.rename(tmp_path / "moved")  # the receipt's paths no longer lead anywhere
    for trace in folder.glob("capture-*/trace.sqlite"):
        trace.unlink()
    receipt = read_receipt(folder)
    phases = load_round(receipt, folder)
    assert phases is not None
    page = write_round_report(receipt, folder, phases=phases).read_text(encoding="utf-8")
    assert list(page_figures(page)) == ["fig-phases", "fig-cta"]
    assert "Inside the kernel (capture-1)" in page and html.escape("come from the captures' stamps") in page
