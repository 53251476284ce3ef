"""The HTML report: its sections, self-containment, escaping, sampling notes, and the command.

The shipped example (fa2 vs fa3 on an H200) checks real numbers; a synthetic
export builds what the example lacks: FlashMLA's split + combine kernels
(a reduce segment), a crossover along ctx, and hostile kernel and NVTX names.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest

import traceattr
from tests.helpers import (
    COMBINE,
    EVIL_KERNEL,
    EXAMPLE,
    FA3,
    ITERS,
    PLOTS,
    SPLIT,
    TIMES,
    flashmla_export,
    json_strings,
    page_figures,
    without_plotlyjs,
)
from tests.synth.builder import TraceBuilder
from traceattr.analysis.pipeline import analyse
from traceattr.attribution.engine import Attribution
from traceattr.cli import main
from traceattr.core.records import RunRecord
from traceattr.present.formats import rule_text
from traceattr.present.names import SEPARATORS, name_lines
from traceattr.present.report import Limits, build_report, write_report
from traceattr.present.report.data import _evenly_in_time, collect
from traceattr.present.report.figures_compare import attribution_figure
from traceattr.present.report.figures_decision import context_figure
from traceattr.present.report.figures_timeline import timeline_figure
from traceattr.present.report.style import backend_colors
from traceattr.present.verdicts import family_line


def hostile_series_export(path: Path) -> Path:
    """A trace of plain top-level ranges whose names (so backend and shape labels) are markup."""
    b = TraceBuilder()
    t = 1_000_000
    for it in range(3):
        b.push_range(tid=1, start=t, end=t + 5_000, message=f"<script>alert(2)</script>_q1_ctx4096:{it}")
        b.launch(tid=1, start=t + 1_000, end=t + 1_500, kernel=EVIL_KERNEL, gpu_start=t + 10_000, gpu_end=t + 30_000)
        t += 100_000
    return b.write(path)


@pytest.fixture(scope="module")
def example_att() -> Attribution:
    return traceattr.open(EXAMPLE).attribute()


@pytest.fixture(scope="module")
def example_html(example_att: Attribution) -> str:
    return build_report(example_att)


@pytest.fixture(scope="module")
def flashmla_att(tmp_path_factory: pytest.TempPathFactory) -> Attribution:
    return traceattr.open(flashmla_export(tmp_path_factory.mktemp("flashmla") / "flashmla.sqlite")).attribute()


class _Tables(HTMLParser):
    """Cell texts of every table row (header rows included)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _numbers(page: str) -> list[dict[str, str]]:
    start = page.index('<table class="numbers ')  # the main table (the folded one is numbers-more)
    table = page[start : page.index("</table>", start)]
    parser = _Tables()
    parser.feed(table)
    head, *rows = parser.rows
    return [dict(zip(head, row, strict=True)) for row in rows]


# -- page structure ---------------------------------------------------------------------------
@pytest.mark.slow
def test_sections_in_order_and_every_plot_present(example_html: str) -> None:
    ids = re.findall(r'<section id="([\w-]+)">', example_html)
    assert ids == ["decision", "numbers", "context", "attribution", "distributions", "timeline", "run"]
    for plot in PLOTS:
        assert f'<div id="{plot}" class="plotly-graph-div"' in example_html
    figures = page_figures(example_html)
    assert list(figures) == list(PLOTS)
    assert all(fig["data"] for fig in figures.values())  # each one draws something


def test_self_contained(example_html: str) -> None:
    assert example_html.count("* plotly.js v") == 1  # the bundle's banner: embedded exactly once
    ours = without_plotlyjs(example_html)
    assert not re.search(r"<script[^>]*\bsrc\s*=", ours, re.I)
    assert not re.search(r"<link\b", ours, re.I)
    assert not re.search(r"<(img|iframe|object|embed)\b", ours, re.I)
    assert not re.search(r"@import|url\(", ours, re.I)
    assert not re.search(r"\bfetch\(|XMLHttpRequest", ours)
    assert "http://" not in ours and "https://" not in ours
    assert "MathJax" not in ours
    assert "Content-Security-Policy" in ours and "connect-src 'none'" in ours


def test_plotly_js_is_plotlys_bundle_inlined_as_is(example_html: str) -> None:
    from plotly.offline import get_plotlyjs

    from traceattr.present.report.html import plotly_js

    bundle = plotly_js()
    assert bundle == get_plotlyjs().encode("utf-8")  # the bytes of the text plotly's own pages inline
    assert bundle.decode("utf-8") in example_html  # whole, its characters beyond Latin-1 among them
    assert max(bundle.decode("utf-8")) > "\xff"  # why the page is assembled as bytes (html.plotly_js)


@pytest.mark.parametrize("end", [b"</script>", b"</SCRIPT ", b"</Script\n"])
def test_a_bundle_that_would_end_its_script_is_refused(end: bytes) -> None:
    from traceattr.present.report.html import Section, page

    with pytest.raises(ValueError, match="cannot be inlined"):
        page("t", "", [Section("s", "S", "i", "<p>b</p>")], b"var a = 1;" + end + b"alert(1)")
    assert page("t", "", [Section("s", "S", "i", "<p>b</p>")], b"").count(b"</script>") == 2  # ours only


@pytest.mark.slow
def test_single_ctx_trace_has_no_context_section(exports: dict[str, Path]) -> None:
    page = build_report(traceattr.open(exports["h200_torch_tiny"]).attribute())
    ids = re.findall(r'<section id="([\w-]+)">', page)
    assert ids == ["numbers", "attribution", "distributions", "timeline", "run"]  # one backend: nothing to decide
    assert "NVTX +1" in page  # its nested range gets a lane of its own


# -- the example's numbers --------------------------------------------------------------------
def test_numbers_table_example(example_html: str) -> None:
    rows = {(r["shape"], r["backend"].split()[0]): r for r in _numbers(example_html)}
    assert len(rows) == 12
    fa3, fa2 = rows[("q8_ctx917504", "fa3")], rows[("q8_ctx917504", "fa2")]
    assert "fastest" in fa3["backend"] and "fastest" not in fa2["backend"]
    assert fa3["× best"] == "1.00×" and fa2["× best"] == "2.25×"
    assert fa3["median µs"] == "428.03" and fa2["median µs"] == "961.21"
    assert fa3["roofline"] == "60% compute"  # of the H200's 989 TFLOP/s dense bf16: q8 × 917,504 ctx is compute bound
    assert fa3["iteration wins"] == "10/10"
    # fa3 is the fastest at every shape of the example
    assert {s for (s, b), r in rows.items() if "fastest" in r["backend"] and b == "fa3"} == {s for s, _ in rows}


# -- FlashMLA: split + combine --------------------------------------------------------------
def test_flashmla_reduce_segment_is_the_combine_kernel(flashmla_att: Attribution) -> None:
    d = collect(flashmla_att)
    fig = attribution_figure(d.summary)
    bars = {t.name: t for t in fig.data if t.type == "bar" and t.meta == "us"}
    shares = {t.name: t for t in fig.data if t.type == "bar" and t.meta == "share"}
    assert all(t.visible for t in bars.values()) and not any(t.visible for t in shares.values())  # opens in µs
    groups = list(zip(*bars["reduce"].x, strict=True))
    mla = groups.index(("q8_ctx128k", "flashmla"))
    fa3 = groups.index(("q8_ctx128k", "fa3"))
    assert bars["reduce"].y[mla] == pytest.approx(TIMES["q8_ctx128k"][0][2])  # the combine kernel, µs
    assert bars["reduce"].y[fa3] == 0  # fa3 merges inside its one kernel
    assert bars["schedule"].y[mla] == pytest.approx(3)
    assert bars["gaps"].y[mla] == pytest.approx(2)  # 1 µs between each of the three kernels
    assert bars["attention"].y[fa3] == pytest.approx(80.2)  # the median call, with its drift
    assert bars["reduce"].marker.color != bars["attention"].marker.color
    stack = sum(bars[seg].y[mla] for seg in ("schedule", "attention", "reduce", "gaps"))
    assert shares["reduce"].y[mla] == pytest.approx(100 * 5 / stack)  # the other view: shares of the call
    assert fig.layout.xaxis.tickangle == 0  # 4 bars of short names: labels side by side
    long = d.summary.with_columns(pl.col("backend") + "[splits=16,page=32,kv=fp8,graphs]")
    assert attribution_figure(long).layout.xaxis.tickangle == -40  # they would collide: slanted


def test_flashmla_timeline_views(flashmla_att: Attribution) -> None:
    d = collect(flashmla_att)
    views = d.timeline.views
    side_by_side = [v for v in views if v.group.startswith("Backends side by side")]
    assert [v.label.split(":")[0] for v in side_by_side] == ["q8_ctx128k", "q8_ctx900k"]
    assert len(views) == len(side_by_side) + 2 * 2 * ITERS  # then every call
    fig = timeline_figure(d.timeline)
    first = fig.layout.meta["views"][0]
    assert first["lanes"] == ["flashmla │ NVTX", "flashmla │ dev 0 · stream 7", "fa3 │ NVTX", "fa3 │ dev 0 · stream 7"]
    shown = [t for t in fig.data if t.visible]
    assert {t.name for t in shown} == {"schedule", "attention", "reduce", "NVTX range"}
    nvtx = next(t for t in shown if t.name == "NVTX range")
    assert all("launch latency" in h for h in nvtx.hovertext)
    assert any("(launch overhead " in h and " + queue wait " in h for h in nvtx.hovertext)  # the call's own range
    reduce = next(t for t in shown if t.name == "reduce")
    assert reduce.x == (5.0,) and reduce.base[0] == pytest.approx(3 + 1 + 60.3 + 1)  # after schedule and split
    # the hostile call: its nested range has a lane, its kernel is an "other" bar
    v = next(i for i, view in enumerate(views) if "iter 0" in view.label and view.group == "q8_ctx128k · flashmla")
    assert "NVTX +1" in fig.layout.meta["views"][v]["lanes"]
    assert "other" in {t.name for t in fig.data if t.meta == v}


@pytest.mark.parametrize("figure", ["timeline", "distributions"])
def test_the_page_draws_the_figure_plotly_checks(flashmla_att: Attribution, figure: str) -> None:
    """The page writes these figures' dicts unchecked (timeline_spec, distributions_spec): the same figure
    plotly's check gives."""
    import plotly.graph_objects as go

    from traceattr.present.report.figures_compare import distributions_spec
    from traceattr.present.report.figures_timeline import timeline_spec
    from traceattr.present.report.style import figure_html

    d = collect(flashmla_att)
    spec = timeline_spec(d.timeline) if figure == "timeline" else distributions_spec(d, backend_colors(d.backends))
    fast, checked = figure_html(spec, "t"), figure_html(go.Figure(spec), "t")  # go.Figure raises on a bad property
    assert page_figures(fast) == page_figures(checked) and len(page_figures(fast)["t"]["data"]) >= 4
    div = fast.split("Plotly.newPlot(")[0]
    assert div == checked.split("Plotly.newPlot(")[0] and f"height:{spec['layout']['height']}px" in div


def test_overlapping_ops_share_their_lane_in_tiers(tmp_path: Path) -> None:
    """A combine kernel launched early (programmatic dependent launch) overlaps its split kernel: both stay visible."""
    b = TraceBuilder()
    dom = b.domain("traceattr", tid=1)
    b.push_range(tid=1, start=1_000, end=9_000, message="backend=flashmla shape=q8_ctx8k arm=A iter=0", domain=dom)
    b.launch(tid=1, start=2_000, end=2_500, kernel=SPLIT, gpu_start=20_000, gpu_end=38_000)
    b.launch(tid=1, start=3_000, end=3_500, kernel=COMBINE, gpu_start=33_000, gpu_end=55_000)
    d = collect(traceattr.open(b.write(tmp_path / "pdl.sqlite")).attribute())
    ops = d.timeline.ops.sort("x0_us")
    assert ops["tier"].to_list() == [0, 1] and ops["tiers"].to_list() == [2, 2]
    assert ops["overlap_us"].to_list() == [0, pytest.approx(5.0)]
    fig = timeline_figure(d.timeline)
    split, combine = (next(t for t in fig.data if t.name == role) for role in ("attention", "reduce"))
    assert split.width[0] == combine.width[0] < 0.5 and split.offset[0] != combine.offset[0]
    assert "overlaps the op before by 5.00 µs" in combine.hovertext[0]


def test_flashmla_crossover_marked(flashmla_att: Attribution) -> None:
    d = collect(flashmla_att)
    cross = d.crossovers.row(0, named=True)
    assert (cross["faster_below"], cross["faster_above"]) == ("flashmla", "fa3")
    assert 128_000 < cross["crossover_ctx"] < 900_000
    assert cross["decided"] and cross["ratio_at_low_lo"] > 1 > cross["ratio_at_high_hi"]
    fig = context_figure(d, backend_colors(d.summary["backend"]))
    labels = [a.text.replace("<br>", " ") for a in fig.layout.annotations if a.name == "rule"]
    assert labels == [rule_text(cross)]  # the sentence `compare` prints, on the chart


def _plot(page: str, div_id: str) -> tuple[list[dict], dict]:
    """The (data, layout) a page hands to Plotly.newPlot for *div_id*, parsed as JSON."""
    start = page.index("Plotly.newPlot(", page.index(f'<div id="{div_id}"'))
    dec = json.JSONDecoder()
    pos = page.index(f'"{div_id}"', start) + len(div_id) + 2
    args = []
    for _ in range(2):
        pos = page.index(",", pos) + 1
        while page[pos].isspace():
            pos += 1
        value, pos = dec.raw_decode(page, pos)
        args.append(value)
    return args[0], args[1]


@pytest.mark.slow
def test_report_rules_are_compare_rules_and_keep_every_shape(tmp_path: Path) -> None:
    """The decision chart of the shipped sweep: compare's crossovers, written on it, and every measured ctx."""
    sweep = Path(__file__).parents[1] / "examples" / "traces" / "h200_mla_sweep.sqlite"
    att = traceattr.open(sweep).attribute()
    cross = analyse(att).crossovers
    assert cross.height == 1 and cross["decided"].all()
    page = build_report(att, limits=Limits(shapes=2))  # the other figures may sample shapes; this one never does
    data, layout = _plot(page, "fig-context")
    on_chart = [html.unescape(a["text"].replace("<br>", " ")) for a in layout["annotations"] if a.get("name") == "rule"]
    assert on_chart == [rule_text(r) for r in cross.iter_rows(named=True)]
    shaded = [(sh["x0"], sh["x1"]) for sh in layout["shapes"] if sh.get("type") == "rect"]
    assert shaded == [(r["ctx_low"], r["ctx_high"]) for r in cross.iter_rows(named=True)]
    ratio = [t for t in data if t.get("meta") == "ratio"]
    assert {t["legendgroup"] for t in ratio} == {"fa2", "fa3", "fa3-per-token", "flashmla"}
    assert all(t["x"] == [8_000, 32_000, 131_000, 512_000, 900_000] for t in ratio)
    roles = {t["xaxis"] for t in data if t.get("meta") == "roles"}
    assert len(roles) == 5  # one role panel, on its own axis, per shape


@pytest.mark.slow
def test_tie_is_drawn_as_a_tie(tmp_path: Path) -> None:
    """Two backends 0.3% apart at both ctx with ±2% call noise, medians crossing: no winner, no rule, and no switch:
    one backend ties with the fastest at every ctx, so the family's line is that backend (as compare says it)."""
    b = TraceBuilder()
    dom = b.domain("traceattr", tid=1)
    t = 1_000_000
    for shape, (ta, tb) in {"q1_ctx32k": (100.0, 100.3), "q1_ctx131k": (300.0, 299.1)}.items():
        for it in range(12):
            for backend, us_ in (("fa3", ta), ("flashmla", tb)):
                b.push_range(tid=1, start=t, end=t + 5_000, message=f"backend={backend} shape={shape} arm=A iter={it}",
                             domain=dom)  # fmt: skip
                dur = int(us_ * 1000 * (1 + 0.02 * ((it * 7) % 12 - 5.5) / 5.5))  # ±2% around the median
                b.launch(tid=1, start=t + 1_000, end=t + 1_500, kernel=FA3, gpu_start=t + 10_000,
                         gpu_end=t + 10_000 + dur)  # fmt: skip
                t += dur + 60_000
    att = traceattr.open(b.write(tmp_path / "tie.sqlite")).attribute()
    d = collect(att)
    assert not d.summary["winner"].any() and set(d.summary["verdict"]) == {"tie"}
    assert d.crossovers.height == 0 and d.decision is not None
    (fam,) = d.decision.families
    assert fam.outcome == "one backend" and not fam.rules
    page = build_report(att)
    data, layout = _plot(page, "fig-context")
    assert not [a for a in layout["annotations"] if a.get("name") == "rule"]
    line = f"{fam.family}: {family_line(fam)}"
    assert "tied within noise at 32k, 131k" in line and html.escape(line) in page  # the note under the chart
    ratio = [t for t in data if t.get("meta") == "ratio"]
    hollow = [t for t in data if t.get("meta") == "tie"]
    assert len(ratio) == 2 and sorted(x for t in hollow for x in t["x"]) == [32_000, 32_000, 131_000, 131_000]
    assert 'class="best"' not in without_plotlyjs(page) and 'class="tie"' in page


# -- escaping ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_hostile_names_render_as_text(flashmla_att: Attribution, tmp_path: Path) -> None:
    pages = [
        build_report(flashmla_att),
        build_report(traceattr.open(hostile_series_export(tmp_path / "h.sqlite")).attribute()),
    ]
    texts = [[t for fig in page_figures(page).values() for t in json_strings(fig)] for page in pages]
    for page, strings in zip(pages, texts, strict=True):
        assert "<script>alert" not in page.lower() and "<script>x" not in page.lower()
        assert any("evil&lt;script&gt;alert(1)&lt;" in t for t in strings)  # the kernel, in timeline hovers
    assert any("traceattr:&lt;script&gt;x&lt;" in t for t in texts[0])  # the nested NVTX range, on its lane
    # the range names say backend "<script>alert(2)</script>", shape q1_ctx4096: table cell and picker group
    assert "</span>&lt;script&gt;alert(2)&lt;/script&gt;</td>" in pages[1]  # alone: no winner badge
    assert '<optgroup label="q1_ctx4096 · &lt;script&gt;alert(2)&lt;/script&gt;">' in pages[1]


# -- sampling ---------------------------------------------------------------------------------
def test_evenly_in_time_keeps_first_last_and_spacing() -> None:
    c = pl.DataFrame({"shape": ["s"] * 10, "backend": ["b"] * 10, "i": range(10)})
    assert c.filter(_evenly_in_time(4))["i"].to_list() == [0, 3, 6, 9]
    assert c.filter(_evenly_in_time(20))["i"].to_list() == list(range(10))


@pytest.mark.slow
def test_caps_leave_visible_notes(flashmla_att: Attribution, tmp_path: Path) -> None:
    limits = Limits(shapes=1, strip_points=2, timeline_calls=3, call_ops=2, timeline_bars=1000)
    info = write_report(flashmla_att, tmp_path / "small.html", limits=limits)
    page = info.path.read_text(encoding="utf-8")
    expected = [
        "the distributions, role bars and timeline show 1 of 2 shapes (series), those with the most GPU time",
        "showing 4 of 10 calls as points: at most 2 per backend and shape",
        "the picker offers 2 of 10 calls",
        "1 call has more than 2 GPU ops: their timelines show the 2 longest",
    ]
    for text in expected:
        assert any(text in note for note in info.notes), text
        assert re.search(r'<div class="note">[^<]*' + re.escape(text), page), text
    # time vs context never drops a shape: both context lengths and the crossover stay
    assert re.findall(r'<section id="([\w-]+)">', page) == [
        "decision", "numbers", "context", "attribution", "distributions", "timeline", "run"
    ]  # fmt: skip
    d = collect(flashmla_att, limits=limits)
    assert sorted(d.context["ctx"].unique()) == [128_000, 900_000] and d.crossovers.height == 1


@pytest.mark.slow
def test_write_report_info_and_run_header(flashmla_att: Attribution, tmp_path: Path) -> None:
    run = {"gpu": {"name": "NVIDIA H200", "driver": "575.57"}, "nsys": {"command": "nsys profile -o <out>"}}
    info = write_report(flashmla_att, tmp_path / "sub" / "r.html", title="FlashMLA <vs> fa3", run=RunRecord(run))
    assert info.path.is_file() and info.size_bytes == info.path.stat().st_size
    assert info.figures == ["decision", "numbers", "context", "attribution", "distributions", "timeline", "run"]
    page = info.path.read_text(encoding="utf-8")
    assert page.count("* plotly.js v") == 1 and list(page_figures(page)) == [f"fig-{f}" for f in info.figures[2:-1]]
    assert "<title>FlashMLA &lt;vs&gt; fa3</title>" in page
    assert "<td>gpu.driver</td><td>575.57</td>" in page and "nsys profile -o &lt;out&gt;" in page
    assert not list(info.path.parent.glob("*.partial"))


def test_header_counts_read_in_the_singular_for_one() -> None:
    from types import SimpleNamespace

    from traceattr.present.report import _measured

    one = SimpleNamespace(totals=SimpleNamespace(calls=2, backends=1, shapes=1, unnamed=0))
    assert _measured(one) == ["2 calls", "1 backend", "1 shape"]  # type: ignore[arg-type]
    mixed = SimpleNamespace(totals=SimpleNamespace(calls=9, backends=2, shapes=3, unnamed=1))
    assert _measured(mixed) == ["9 calls", "2 backends", "3 shapes", "1 series named without backend and shape"]  # type: ignore[arg-type]


@pytest.mark.slow
def test_header_does_not_count_unparsed_names_as_backends(exports: dict[str, Path]) -> None:
    """torch_tiny's ranges (call:<i>, graph:<i>) name no backend or shape: each series is drawn as its own,
    and the header says so instead of "2 backends, 2 shapes"."""
    page = build_report(traceattr.open(exports["h200_torch_tiny"]).attribute())
    assert "· 8 calls, 2 series named without backend and shape</p>" in page
    assert "backends" not in re.findall(r'<p class="subtitle">(.*?)</p>', page)[0]


def test_names_break_only_after_a_separator() -> None:
    assert name_lines("KernelExecutor::runFusion", 24) == ["KernelExecutor::", "runFusion"]
    assert name_lines("nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN", 24) == [
        "nvjet_tst_192x192_64x4_", "2x1_v_bz_coopB_bias_TNN",
    ]  # fmt: skip
    assert name_lines("std::array<char*, 1>", 6) == ["std::", "array<", "char*,", "1>"]  # "::" stays whole
    assert name_lines("x" * 30, 10) == ["x" * 30]  # a part with no separator is never cut
    for name in ("a b  c", "fa3|q8_ctx131k|0", ""):
        assert "".join(name_lines(name, 3)).replace(" ", "") == name.replace(" ", "")


@pytest.mark.slow
def test_a_public_fixture_page_breaks_labels_only_at_separators(exports: dict[str, Path]) -> None:
    """fuser's one series, KernelExecutor::runFusion, is 25 characters: its per-call tick label read
    ``KernelExecutor::runFusio`` / ``n``."""
    figures = page_figures(build_report(traceattr.open(exports["fuser_h200_nsys2024_6"]).attribute()))
    labels = [t for f in figures.values() for k, v in f["layout"].items() if k.startswith("xaxis")
              for t in v.get("ticktext", ())]  # fmt: skip
    titles = [a["text"] for f in figures.values() for a in f["layout"].get("annotations", ())]
    assert "KernelExecutor::<br>runFusion" in labels, labels
    for text in [*labels, *titles]:
        for cut in re.finditer("<br>", text):
            assert text[cut.start() - 1] in SEPARATORS or text[cut.start() - 1] == " ", text


# -- the command ------------------------------------------------------------------------------
@pytest.mark.slow
def test_cli_run_folder_writes_report_html(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE, tmp_path / "trace.sqlite")
    (tmp_path / "run.json").write_text(json.dumps({"gpu": {"name": "NVIDIA H200"}, "driver": "575.57.08"}))
    out = subprocess.run(
        [sys.executable, "-m", "traceattr", "report", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    target = tmp_path / "report.html"
    assert out.stdout.strip() == f"wrote {target} ({target.stat().st_size / 1e6:.1f} MB)"
    assert "<td>driver</td><td>575.57.08</td>" in target.read_text(encoding="utf-8")


@pytest.mark.slow
def test_cli_default_name_beside_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = shutil.copy(EXAMPLE, tmp_path / "h200.sqlite")
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(trace), "--match", "fa3_h16_q8", "--title", "fa3 only"])
    assert exit_info.value.code == 0
    assert "wrote " + str(tmp_path / "h200.report.html") in capsys.readouterr().out
    rows = _numbers((tmp_path / "h200.report.html").read_text(encoding="utf-8"))
    assert {r["backend"].split()[0] for r in rows} == {"fa3"} and len(rows) == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{missing}"], "{missing}: no such file"),
        (["{dir}"], "{dir}: is a directory without trace.sqlite"),
        (["{example}", "--match", "("], "--match: invalid regular expression"),
        (["{example}", "--match", "nothing-matches"], "{example}: the --domain/--match filter chose no range"),
    ],
)
def test_cli_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    names = {"missing": str(tmp_path / "missing.sqlite"), "dir": str(tmp_path), "example": str(EXAMPLE)}
    with pytest.raises(SystemExit) as exit_info:
        main(["report", *[a.format(**names) for a in args], "-o", str(tmp_path / "x.html")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("traceattr: error: ") and message.format(**names) in err
    assert not (tmp_path / "x.html").exists()
