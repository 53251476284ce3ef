"""Inside the kernel on the page (in-kernel stamps, docs/phases.md): the median call's phases as stacked bars,
and one call CTA by CTA under nsys's record of its kernels.

Drawn from the one record (:class:`~traceattr.phases.report.PhaseReport`; a round's
:class:`~traceattr.phases.compare.RoundPhases`) with the wordings of :mod:`traceattr.present.phases`, so the
page says what the terminal and receipt.md say. Phase colours come from :mod:`traceattr.present.palette`.
The CTA timeline has one view per (arm, shape), switched by the page's picker as the timeline's are: every
view is in the figure up front (``layout.meta.views``: lanes, x range, height, title).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
import polars as pl

from traceattr.analysis.rounds import Receipt
from traceattr.phases.attribute import LAUNCH, TEARDOWN, MedianCall
from traceattr.phases.compare import PhaseComparison, RoundPhases
from traceattr.phases.report import PhaseReport, cta_timeline
from traceattr.present.palette import PHASE_KERNEL, phase_boundary, phase_colors
from traceattr.present.phases import (
    MOVED_HEAD,
    MOVED_INTRO,
    bound_text,
    clamped_text,
    interval_us,
    row_labels,
    signed_us,
    sum_text,
    us,
)
from traceattr.present.report.html import Section
from traceattr.present.report.style import esc, figure_html, new_figure

BAR_PX = 30  # per (arm, row) bar
CTA_AREA_PX = 720  # the CTA lanes of a view share about this much height …
LANE_PX = (2.0, 14.0)  # … each lane at least / at most this
LANE_WIDTH = 0.8  # of a lane
# a later kernel's phases: its boundary's colour, hatched over
LATER_KERNEL = {"shape": "/", "solidity": 0.3, "fgcolor": "rgba(0, 0, 0, 0.5)", "fillmode": "overlay"}


def _bar_label(m: MedianCall, labels: dict[str, str]) -> str:
    return f"{labels.get(m.shape, m.shape)} · {m.arm}"


def phase_bars_figure(report: PhaseReport, labels: dict[str, str] | None = None) -> go.Figure:
    """Per (arm, row) the median call's phases stacked in critical-path order (µs), each with its 95% interval
    at its end; a black tick at the median nsys span. A later kernel's phases are hatched."""
    labels = labels or {}
    medians = list(report.medians)
    names = _phase_order(medians)
    colors = phase_colors(names)
    later = {p.phase for m in medians for p in m.phases if p.position >= 2000}  # the call's second kernel on
    fig = new_figure(max(220, 150 + BAR_PX * len(medians)), barmode="stack", hovermode="closest")
    ys = [esc(_bar_label(m, labels)) for m in medians]
    for name in names:
        rows = [(esc(_bar_label(m, labels)), p, m) for m in medians for p in m.phases if p.phase == name]
        if not rows:
            continue
        marker: dict[str, Any] = {"color": colors[name], "line": {"color": "#ffffff", "width": 0.5}}
        if name in later:
            marker["pattern"] = LATER_KERNEL
        fig.add_trace(go.Bar(
            orientation="h", y=[y for y, _, _ in rows], x=[p.median_ns / 1e3 for _, p, _ in rows], name=esc(name),
            marker=marker,
            error_x={"type": "data", "symmetric": False, "array": [(p.high_ns - p.median_ns) / 1e3 for _, p, _ in rows],
                     "arrayminus": [(p.median_ns - p.low_ns) / 1e3 for _, p, _ in rows], "thickness": 1, "width": 3,
                     "color": "#333333"},
            hovertext=[f"<b>{esc(name)}</b> · {esc(m.arm)} · {esc(m.shape)}<br>{us(p.median_ns)} µs "
                       f"[{us(p.low_ns)}, {us(p.high_ns)}] (95%) = {p.median_ns / m.span_ns:.1%} of the median "
                       f"span · {p.calls} calls" for _, p, m in rows],
            hovertemplate="%{hovertext}<extra></extra>",
        ))  # fmt: skip
    fig.add_trace(go.Scatter(
        x=[m.span_ns / 1e3 for m in medians], y=ys, mode="markers", name="median nsys span",
        marker={"symbol": "line-ns-open", "size": 22, "color": "#111111", "line": {"width": 2}},
        hovertext=[esc(sum_text(m)) for m in medians], hovertemplate="%{hovertext}<extra></extra>",
    ))  # fmt: skip
    fig.update_layout(
        xaxis={"title": {"text": "µs of the median call (phase medians over every stamped call; bars: 95% interval)"},
               "rangemode": "tozero"},
        yaxis={"type": "category", "categoryorder": "array", "categoryarray": ys, "autorange": "reversed"},
        legend={"traceorder": "normal"}, margin={"t": 90},
    )  # fmt: skip
    return fig


def _phase_order(medians: Sequence[MedianCall]) -> list[str]:
    """Every call phase of *medians*, in critical-path order (by position, first seen first)."""
    pos: dict[str, int] = {}
    for m in medians:
        for p in m.phases:
            pos.setdefault(p.phase, p.position)
    return sorted(pos, key=lambda n: pos[n])


def cta_figure(report: PhaseReport, labels: dict[str, str] | None = None) -> go.Figure:
    """One view per (arm, row): its typical call (the one whose span is nearest the median), nsys's kernels on
    top and each CTA's phases on a lane of its own below, all on one axis from the call's first kernel start."""
    labels = labels or {}
    views: list[dict[str, Any]] = []
    fig = new_figure(300, barmode="overlay", hovermode="closest")
    inner = (phase_boundary(p.phase) for m in report.medians for p in m.phases)
    shown = list(dict.fromkeys([LAUNCH, *(b for b in inner if b not in (LAUNCH, TEARDOWN, "gap")), TEARDOWN]))
    colors = phase_colors(shown)
    for v, m in enumerate(report.medians):
        kernels, phases = cta_timeline(report, m)
        lanes = [f"nsys · {k}" for k in kernels["kernel"].to_list()]
        phases = phases.with_columns(pl.format("{} CTA {}", pl.col("kernel"), pl.col("cta")).alias("lane"))
        lanes += phases["lane"].unique(maintain_order=True).to_list()
        fig.add_trace(go.Bar(
            orientation="h", y=[esc(lane) for lane in lanes[: kernels.height]], x=(kernels["duration_ns"] / 1e3).to_list(),
            base=(kernels["x0_ns"] / 1e3).to_list(), width=LANE_WIDTH, name="nsys kernel", legendgroup="nsys kernel",
            marker={"color": PHASE_KERNEL}, visible=v == 0, meta=v,
            hovertext=[f"<b>{esc(k)}</b> (nsys): {us(d)} µs from +{us(x)} µs" for k, x, d in kernels.iter_rows()],
            hovertemplate="%{hovertext}<extra></extra>",
        ))  # fmt: skip
        for phase in shown:
            part = phases.filter(pl.col("phase") == phase)
            if part.height == 0:
                continue
            fig.add_trace(go.Bar(
                orientation="h", y=[esc(lane) for lane in part["lane"].to_list()],
                x=(part["duration_ns"] / 1e3).round(3).to_list(), base=(part["x0_ns"] / 1e3).round(3).to_list(),
                width=LANE_WIDTH, name=esc(phase), legendgroup=phase, marker={"color": colors[phase]},
                customdata=part.select("sm").to_numpy(), visible=v == 0, meta=v,
                hovertemplate=f"%{{y}} · SM %{{customdata[0]}}<br><b>{esc(phase)}</b> %{{x:,.2f}} µs"
                              f"<br>from +%{{base:,.2f}} µs<extra></extra>",
            ))  # fmt: skip
        ctas = len(lanes) - kernels.height
        lane_px = min(LANE_PX[1], max(LANE_PX[0], CTA_AREA_PX / max(ctas, 1)))
        end = float((kernels["x0_ns"] + kernels["duration_ns"]).max() or 1.0) / 1e3  # type: ignore[operator]
        title = (f"{_bar_label(m, labels)}: call iter {m.typical_iter} ({us(m.span_ns)} µs, the call nearest the "
                 f"median span), {ctas} CTAs")  # fmt: skip
        views.append({"lanes": [esc(lane) for lane in lanes], "x": [-0.02 * end, 1.02 * end],
                      "height": int(150 + 24 * kernels.height + lane_px * ctas), "title": esc(title)})  # fmt: skip
    first = views[0] if views else {"lanes": [], "x": [0, 1], "height": 300, "title": ""}
    fig.update_layout(
        meta={"views": views}, height=first["height"], title={"text": first["title"], "font": {"size": 13}},
        xaxis={"title": {"text": "µs since the call's first kernel start (nsys's axis; stamps aligned to it)"},
               "range": first["x"]},
        yaxis={"type": "category", "categoryorder": "array", "categoryarray": first["lanes"],
               "range": [len(first["lanes"]) - 0.5, -0.5], "autorange": False},
        legend={"traceorder": "normal"}, margin={"t": 90}, bargap=0,
    )  # fmt: skip
    return fig


def picker_html(report: PhaseReport, figure_id: str, labels: dict[str, str] | None = None) -> str:
    """The ``<select>`` that switches the CTA timeline's views (the page's script does the switching)."""
    options = "".join(
        f'<option value="{v}">{html.escape(_bar_label(m, labels or {}))}</option>' for v, m in enumerate(report.medians)
    )
    return (
        f'<label class="picker">Show <select data-views="{figure_id}" aria-label="CTA view">{options}</select></label>'
    )


def median_table_html(report: PhaseReport, labels: dict[str, str] | None = None) -> str:
    """The median calls' phases as a table: the numbers the terminal prints (folded under the figures)."""
    head = ("arm", "row", "phase", "median µs", "95% interval µs", "share of the span")
    rows = []
    for m in report.medians:
        row = html.escape(labels.get(m.shape, m.shape) if labels else m.shape)
        for p in m.phases:
            cells = (html.escape(m.arm), row, html.escape(p.phase), us(p.median_ns), f"[{us(p.low_ns)}, {us(p.high_ns)}]",
                     f"{p.median_ns / m.span_ns:.1%}" if m.span_ns else "—")  # fmt: skip
            rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        total = (html.escape(m.arm), row, "<b>Σ phases</b>", f"<b>{us(m.phase_sum_ns)}</b>", f"span {us(m.span_ns)}",
                 f"{m.sum_error:+.2%}")  # fmt: skip
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in total) + "</tr>")
    return _table(head, rows)


def _table(head: Sequence[str], rows: Sequence[str]) -> str:
    return (
        '<div class="table-wrap"><table class="numbers">'
        f"<thead><tr>{''.join(f'<th>{html.escape(x)}</th>' for x in head)}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


PHASES_INTRO = (
    "In-kernel stamps (%globaltimer per CTA at named boundaries), aligned with nsys's record of the same kernels "
    "by one offset and skew per capture. A phase is named after the boundary it ends at; launch runs from nsys's "
    "kernel start to a CTA's first stamp, teardown from its last stamp to nsys's kernel end, gap→kernel between "
    "two kernels of a call. The bars: per arm and row the median call's critical path (the last CTA to finish of "
    "each kernel), each phase the median over every stamped call with its 95% interval, a later kernel's phases "
    "hatched, the black tick the median nsys span. Below, one call CTA by CTA: nsys's kernels on top, each CTA's "
    "phases on its own lane (program order; hover for its SM). Then what bounds each row: the floor probes, the "
    "fixed-cost verdict and the roofline share compare shows; the numbers, folded, as the terminal prints them."
)


def phases_section(report: PhaseReport, labels: dict[str, str] | None = None) -> Section:
    """The page's "Inside the kernel" section of one capture."""
    notes = [clamped] if (clamped := clamped_text(report)) else []
    bounds = "".join(f"<li>{html.escape(f'{b.arm} {labels.get(b.shape, b.shape) if labels else b.shape}: ')}"
                     f"{html.escape(bound_text(b))}</li>" for b in report.bounds)  # fmt: skip
    body = (
        f'<p class="hint">{html.escape(report.alignment.describe())}</p>'
        + figure_html(phase_bars_figure(report, labels), "fig-phases")
        + picker_html(report, "fig-cta", labels)
        + figure_html(cta_figure(report, labels), "fig-cta")
        + f'<h3>What bounds each row</h3><ul class="rules">{bounds}</ul>'
        + "<details><summary>The median calls' phases (as the terminal prints them)</summary>"
        + median_table_html(report, labels)
        + "</details>"
    )
    return Section("phases", "Inside the kernel", PHASES_INTRO, body, tuple(notes))


# -- a round ----------------------------------------------------------------------------------------------------


def moved_html(rows: Sequence[tuple[str, str]]) -> str:
    """The receipt's "which phase moved" on the page: the words receipt.md and the terminal print."""
    if not rows:
        return ""
    items = "".join(f"<li><b>{html.escape(label)}</b>: {html.escape(text)}</li>" for label, text in rows)
    return f"<h3>{html.escape(MOVED_HEAD)}</h3><p>{html.escape(MOVED_INTRO[0].upper() + MOVED_INTRO[1:])}.</p><ul>{items}</ul>"


def comparison_html(c: PhaseComparison, labels: dict[str, str]) -> str:
    """Every phase of every row on both sides, the change and its interval (the round's phase table)."""
    head = ("row", "phase", f"{c.baseline} µs", f"{c.candidate} µs", "Δ µs", "95% interval", "moved")
    rows = []
    for d in c.deltas:
        cells = (labels.get(d.shape, d.shape), d.phase, us(d.baseline_ns), us(d.candidate_ns), signed_us(d.delta_ns),
                 interval_us(d.low_ns, d.high_ns), "moved" if d.moved else "")  # fmt: skip
        rows.append("<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in cells) + "</tr>")
    return _table(head, rows)


def round_phases_section(phases: RoundPhases, receipt: Receipt) -> Section:
    """Every phase of every row over every stamped capture (the receipt above says which moved; the first
    capture's figures come later)."""
    labels = row_labels(phases, receipt)
    aligned = "".join(f'<p class="hint">{html.escape(f"{r.folder.name}: {r.alignment.describe()}")}</p>'
                      for r in phases.captures)  # fmt: skip
    return Section(
        "round-phases",
        "Phases: candidate vs baseline",
        "Per row and phase (in-kernel stamps): each arm's median over the calls of every stamped capture, the change "
        "candidate − baseline and its 95% interval (the two medians' distribution-free intervals combined); a phase "
        "only one arm has (a reduce kernel the other merges in-kernel) counts 0 for the other. Moved: the interval "
        "excludes 0 (the receipt above lists them per row, the largest first).",
        aligned + comparison_html(phases.comparison, labels),
    )
