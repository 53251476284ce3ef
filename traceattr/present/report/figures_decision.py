"""The decision along context: which backend to use below and above which ctx, and why.

Per shape family (shapes that differ only in ctx), two rows share the width:

* every backend's median time as a ratio to the fastest backend's at that ctx
  (log ctx, log ratio, so a backend 5× off stays on the chart beside a 1.07×
  one; each line named at its right end; bars: the 95% interval), with each
  crossing of :func:`traceattr.analysis.crossover.crossovers` written on the
  chart in the words ``compare`` prints and its measured bracket shaded: a
  decided rule in green, a tie within noise in grey. Open markers are backends
  tied with the fastest at that ctx (no winner there);
* per shape, the parts of each backend's median call (each role's exposed time,
  overlap and idle gaps: they add up to its span), each shape on its own µs
  axis, so a 20 µs shape is as readable as a 2 ms one.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from traceattr.core.shapes import fmt_ctx
from traceattr.present.formats import interval, rule_text, tie_text, times, us
from traceattr.present.report.data import ReportData
from traceattr.present.report.style import ROLE_COLORS, SEGMENTS, TEMPLATE, esc, segment_part, segment_pattern
from traceattr.present.verdicts import family_line

MAX_COLS = 6  # role panels per row; a family with more context lengths wraps onto more rows
RATIO_PX, BARS_PX, GAP_PX = 400, 200, 96  # heights: ratio panel, role panel row, space between rows
RATIO_TICKS = (0.9, 0.95, 1, 1.05, 1.1, 1.25, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32)
LABEL_ROOM = 2.6  # the ctx axis runs this factor past the largest ctx: room for the backends' names
DECIDED_FILL, TIE_FILL = "rgba(26,127,55,0.10)", "rgba(120,120,120,0.14)"


def _segment_column(segment: str) -> str:
    return f"call_{segment_part(segment)}_us"  # the median call's part (see report.data.collect)


def _layout(d: ReportData) -> tuple[list[str], list[int], int]:
    """Families, the subplot row index (1-based) of each family's ratio panel, and the column count."""
    families = d.context["family"].unique(maintain_order=True).to_list()
    n_ctx = [d.context.filter(pl.col("family") == f)["ctx"].n_unique() for f in families]
    cols = min(MAX_COLS, max(n_ctx))
    starts, row = [], 1
    for n in n_ctx:
        starts.append(row)
        row += 1 + math.ceil(n / cols)
    return families, starts, cols


def context_figure(d: ReportData, colors: dict[str, str]) -> go.Figure:
    """The decision chart (see module doc); every shape of every family, none dropped."""
    families, starts, cols = _layout(d)
    kinds: list[str] = []  # "ratio" or "bars", per subplot row
    for family in families:
        n = d.context.filter(pl.col("family") == family)["ctx"].n_unique()
        kinds += ["ratio"] + ["bars"] * math.ceil(n / cols)
    heights = [RATIO_PX if k == "ratio" else BARS_PX for k in kinds]
    total = sum(heights) + GAP_PX * (len(kinds) - 1)
    specs = [[{"colspan": cols}] + [None] * (cols - 1) if k == "ratio" else [{}] * cols for k in kinds]
    titles: list[str] = []
    for family in families:
        shapes = _shapes(d, family)
        titles.append(f"<b>{esc(family)}</b>: median time ÷ the fastest backend's, against context length")
        titles += [f"{esc(fmt_ctx(c))} ctx: µs per call by role" for c, _ in shapes]
        titles += [""] * ((-len(shapes)) % cols)
    fig = make_subplots(
        rows=len(kinds), cols=cols, specs=specs, row_heights=heights, vertical_spacing=GAP_PX / total,
        horizontal_spacing=0.035, subplot_titles=titles,
    )  # fmt: skip
    for i, family in enumerate(families):
        _ratio_panel(fig, d, family, starts[i], colors, first=i == 0)
        _role_panels(fig, d, family, starts[i] + 1, cols, first=i == 0)
    fig.update_layout(
        template=TEMPLATE, height=total + 150, barmode="stack", hovermode="closest",
        margin={"t": 100, "l": 70, "r": 30, "b": 50},
        # the legend sits above the first panel, left, clear of plotly's toolbar (top right)
        legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 1, "yanchor": "bottom", "yref": "container",
                "valign": "top", "entrywidth": 0, "font": {"size": 12}},
    )  # fmt: skip
    fig.update_layout(legend_y=1 - 30 / (total + 150), legend_yanchor="top")
    for ann in fig.layout.annotations[: len(titles)]:
        ann.font = {"size": 12}
    return fig


def _shapes(d: ReportData, family: str) -> list[tuple[int, str]]:
    part = d.context.filter(pl.col("family") == family)
    return part.select("ctx", "shape").unique().sort("ctx").rows()


def _ratio_panel(fig: go.Figure, d: ReportData, family: str, row: int, colors: dict[str, str], first: bool) -> None:
    part = d.context.filter(pl.col("family") == family)
    # a log axis from below 1 to above the slowest backend's interval: every backend on the chart
    top = float(part.select(pl.max_horizontal("vs_best_high", "ratio_to_best").max()).item() or 1.1) * 1.08
    for backend in sorted(part["backend"].unique().to_list()):
        line = part.filter(pl.col("backend") == backend).sort("ctx")
        name = esc(backend)
        low = line["vs_best_low"].fill_null(line["ratio_to_best"])
        high = line["vs_best_high"].fill_null(line["ratio_to_best"])
        tie = (line["verdict"] == "tie").to_list()
        hover = [
            f"<b>{esc(backend)}</b> · {esc(s)}<br>median {us(m, 2)} µs = {times(r, 3)} the fastest"
            f" (95% interval {interval(lo, hi)})<br>{esc(_verdict_words(v, p, same))}"
            for s, m, r, lo, hi, v, p, same in zip(
                line["shape"], line["median_us"], line["ratio_to_best"], low, high, line["verdict"],
                line["tie_pct"], line["same_program_as"], strict=True,
            )
        ]  # fmt: skip
        fig.add_trace(
            go.Scatter(
                x=line["ctx"].to_list(), y=line["ratio_to_best"].to_list(), mode="lines+markers+text", name=name,
                text=[""] * (line.height - 1) + [name], textposition="middle right",
                textfont={"color": colors[backend], "size": 12},
                legendgroup=backend, showlegend=first, line={"color": colors[backend], "width": 2},
                marker={"size": 9, "color": colors[backend]},
                error_y={"type": "data", "symmetric": False, "array": (high - line["ratio_to_best"]).to_list(),
                         "arrayminus": (line["ratio_to_best"] - low).to_list(), "thickness": 1.2, "width": 4},
                hovertext=hover, hovertemplate="%{hovertext}<extra></extra>", meta="ratio",
            ),
            row=row, col=1,
        )  # fmt: skip
        if any(tie):  # tied with the fastest there: hollow markers over the line (the legend keeps a filled one)
            ties = line.filter(pl.col("verdict") == "tie")
            fig.add_trace(
                go.Scatter(
                    x=ties["ctx"].to_list(), y=ties["ratio_to_best"].to_list(), mode="markers", showlegend=False,
                    legendgroup=backend, marker={"size": 9, "color": "white", "line": {"width": 2, "color": colors[backend]}},
                    hoverinfo="skip", meta="tie",
                ),
                row=row, col=1,
            )  # fmt: skip
    ctx = part["ctx"].cast(pl.Float64)
    lo_x = math.log10(float(ctx.min()) / 1.3)  # type: ignore[arg-type]
    hi_x = math.log10(float(ctx.max()) * LABEL_ROOM)  # type: ignore[arg-type]
    axis = fig.get_subplot(row, 1)
    for k, r in enumerate(d.crossovers.filter(pl.col("family") == family).iter_rows(named=True)):
        fill = DECIDED_FILL if r["decided"] else TIE_FILL
        fig.add_vrect(x0=r["ctx_low"], x1=r["ctx_high"], fillcolor=fill, line_width=0, layer="below", row=row, col=1)
        if r["decided"]:
            fig.add_vline(x=r["crossover_ctx"], line={"color": "#1a7f37", "dash": "dot", "width": 1.5}, row=row, col=1)
        # the rule, in compare's words, beside its bracket; staggered so that two rules never overlap
        where = (math.log10(r["crossover_ctx"]) - lo_x) / (hi_x - lo_x)
        anchor = "left" if where < 0.3 else "right" if where > 0.7 else "center"
        fig.add_annotation(
            x=math.log10(r["crossover_ctx"]), y=1 - 0.03 - 0.2 * k, xref=axis.xaxis.plotly_name.replace("axis", ""),
            yref=f"{axis.yaxis.plotly_name.replace('axis', '')} domain", xanchor=anchor, yanchor="top", align=anchor,
            text=esc(rule_text(r)).replace(" (measured", "<br>(measured").replace(" between", "<br>between"),
            showarrow=False, bgcolor="rgba(255,255,255,0.9)", bordercolor="#1a7f37" if r["decided"] else "#999",
            borderwidth=1, borderpad=4, font={"size": 12, "color": "#14532d" if r["decided"] else "#444"},
            name="rule",
        )  # fmt: skip
    fig.add_hline(y=1, line={"color": "#888", "width": 1}, row=row, col=1)
    ticks = _ctx_ticks(sorted(set(part["ctx"].to_list())))
    fig.update_xaxes(type="log", range=[lo_x, hi_x], tickvals=ticks, ticktext=[fmt_ctx(v) for v in ticks],
                     title_text="context length (tokens)", title_standoff=4, row=row, col=1)  # fmt: skip
    low = part["vs_best_low"].filter(part["vs_best_low"] > 0).min()  # a log axis: ratios ≤ 0 (impossible
    # times, noted by the loader) are left off it rather than taking the axis down with them
    bottom = min(0.97, float(low or 1) * 0.99)  # type: ignore[arg-type]
    ticks_y = _ratio_ticks(bottom, top)
    fig.update_yaxes(type="log", range=[math.log10(bottom), math.log10(top)], tickvals=ticks_y,
                     ticktext=[f"{t:g}×" for t in ticks_y], title_text="× fastest (log)", row=row, col=1)  # fmt: skip


def _ratio_ticks(bottom: float, top: float) -> list[float]:
    """Ticks of the log ratio axis, 1 always, the others thinned so that about a dozen fit without crowding."""
    room = (math.log10(top) - math.log10(bottom)) / 12
    ticks: list[float] = []
    for t in sorted({1.0, *RATIO_TICKS}):
        if bottom <= t <= top and (t == 1 or all(abs(math.log10(t / k)) >= room for k in ticks)):
            ticks.append(t)
    return ticks


def _verdict_words(verdict: str | None, tie_pct: float | None, same: str | None) -> str:
    return {
        "winner": "faster than every other backend here (95%)",
        "tie": f"{tie_text(tie_pct)} with the fastest here",
        "slower": "really slower than the fastest here (95%)",
        "same program": f"the same program as {same} here",
        "alone": "the only backend measured here",
    }.get(verdict or "", "")


def _ctx_ticks(measured: list[int]) -> list[int]:
    """Tick at every measured context length (where the points are), thinned when they crowd."""
    ticks: list[int] = []
    for c in measured:
        if not ticks or c / ticks[-1] >= 1.6:
            ticks.append(c)
    return ticks


def _role_panels(fig: go.Figure, d: ReportData, family: str, row: int, cols: int, first: bool) -> None:
    """One stacked bar per backend and shape: the median call's parts in µs, each shape on its own y axis."""
    part = d.context.filter(pl.col("family") == family)
    shown = [s for s in SEGMENTS if (part[_segment_column(s)].fill_null(0) > 0).any()]
    legend_done: set[str] = set()
    for j, (_, shape) in enumerate(_shapes(d, family)):
        r, c = row + j // cols, j % cols + 1
        bars = part.filter(pl.col("shape") == shape).sort("backend")  # the same order in every panel
        for seg in shown:
            values = bars[_segment_column(seg)].fill_null(0)
            marker: dict[str, object] = {"color": ROLE_COLORS[seg]}
            if pattern := segment_pattern(seg):
                marker["pattern"] = pattern
            fig.add_trace(
                go.Bar(
                    x=[esc(b) for b in bars["backend"]], y=values.to_list(), name=seg, legendgroup=f"role-{seg}",
                    showlegend=first and seg not in legend_done, marker=marker, meta="roles",
                    hovertext=[f"<b>{esc(b)}</b> · {esc(shape)}<br>{seg}: {us(v, 2)} µs of the median call"
                               f" ({us(m, 2)} µs)" for b, v, m in zip(bars["backend"], values,
                                                                    bars["call_span_us"], strict=True)],
                    hovertemplate="%{hovertext}<extra></extra>",
                ),
                row=r, col=c,
            )  # fmt: skip
            legend_done.add(seg)
        fig.update_xaxes(tickangle=-30, tickfont={"size": 10}, row=r, col=c)
        fig.update_yaxes(title_text="µs" if c == 1 else None, rangemode="tozero", row=r, col=c)


def context_notes(d: ReportData) -> list[str]:
    """One line per family drawn without a decided switch: the decision's line for it (the chart draws the
    rules)."""
    out = []
    for f in d.decision.families if d.decision is not None else ():
        if not f.along_ctx or f.rules:
            continue
        out.append(f"{f.family}: {family_line(f)}")
    return out
