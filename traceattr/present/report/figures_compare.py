"""Backends side by side: where a call's time goes, how it varies, and how it grows with context."""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from traceattr.present.formats import pct, us
from traceattr.present.report.data import ReportData
from traceattr.present.report.style import (
    GAPS,
    OVERLAP,
    ROLE_COLORS,
    SEGMENTS,
    TEMPLATE,
    esc,
    new_figure,
    segment_part,
    segment_pattern,
    wrap_name,
)

_LABEL_ROOM = 150  # characters of tick labels a default-width report holds on one line


def attribution_figure(summary: pl.DataFrame) -> go.Figure:
    """Stacked exposed time per role, overlap and gaps per backend, grouped by shape.

    The parts partition each call's span (:mod:`traceattr.attribution.calltime`); the bars are the
    median call's (one real call: its parts add up to its span, the black tick in µs, 100% in
    shares; see :func:`traceattr.present.report.data.collect`); the hover adds the part's share of all
    calls' time. µs first: a backend that runs one kernel is a 100% bar in shares whatever it costs,
    so shares alone would hide that fp8 takes 3× as long; the shares view (one click) shows a 5% combine
    kernel as a visible band next to shapes ten times slower. Each trace's ``meta`` says which view it
    belongs to ("us" or "share").
    """
    s = summary
    backends = [esc(v) for v in s["backend"].to_list()]
    # two levels (shape, then backend) unless the calls named neither, so that both are the series
    x = backends if s["shape"].equals(s["backend"]) else [[esc(v) for v in s["shape"].to_list()], backends]
    shown = [seg for seg in SEGMENTS if (s[f"call_{segment_part(seg)}_us"].fill_null(0) > 0).any()]
    fig = new_figure(420, barmode="stack", hovermode="closest")
    for view in ("us", "share"):
        for seg in shown:
            values = s[f"call_{segment_part(seg)}_us"].fill_null(0)
            share = (values / s["call_span_us"]).fill_nan(0).fill_null(0)
            overall = s[f"{segment_part(seg)}_share"].fill_null(0)
            what = {GAPS: "nothing running", OVERLAP: "two or more roles at once"}.get(seg, f"only {seg} running")
            hover = [
                f"<b>{esc(b)}</b> · {esc(sh)}<br>{seg} ({what}): <b>{us(v, 2)} µs</b> = {pct(p)} of the median "
                f"call ({us(m, 2)} µs)<br>{pct(a)} of all its calls' time · median of this part {us(med, 2)} µs"
                f"<br>{k:g} kernels per call"
                for b, sh, v, p, m, a, med, k in zip(s["backend"], s["shape"], values, share, s["call_span_us"],
                                                     overall, s[f"{segment_part(seg)}_us"].fill_null(0),
                                                     s["kernels"].fill_null(0), strict=True)
            ]  # fmt: skip
            marker: dict[str, object] = {"color": ROLE_COLORS[seg]}
            if pattern := segment_pattern(seg):
                marker["pattern"] = pattern
            fig.add_trace(
                go.Bar(
                    x=x, y=(100 * share if view == "share" else values).to_list(), name=seg, legendgroup=seg,
                    marker=marker, hovertext=hover, hovertemplate="%{hovertext}<extra></extra>",
                    visible=view == "us", meta=view,
                )
            )  # fmt: skip
    fig.add_trace(
        go.Scatter(
            x=x, y=s["call_span_us"].to_list(), mode="markers", name="median call (span)", visible=True, meta="us",
            marker={"symbol": "line-ew-open", "size": 26, "color": "#111", "line": {"width": 2}},
            hovertemplate="median call %{y:,.2f} µs<extra></extra>",
        )
    )  # fmt: skip
    in_us = [t.meta == "us" for t in fig.data]
    share_title, us_title = "% of the median call", "µs of the median call"
    # level labels side by side while they fit the plot (~150 characters wide); slanted once they would collide
    longest = max((len(b) for b in s["backend"].to_list()), default=0)
    crowded = len(backends) * longest > _LABEL_ROOM
    # slanted labels take room below the plot (about 4.5 px a character at -40°): the figure grows by it, so the
    # bars keep their height instead of being squeezed under long (C++) names
    fig.update_layout(height=360 + (int(4.5 * min(longest, 120)) if crowded else 60))
    fig.update_layout(
        yaxis={"title": {"text": us_title}, "rangemode": "tozero"},
        xaxis={"tickangle": -40 if crowded else 0, "automargin": True},
        updatemenus=[_unit_buttons(in_us, ("µs", "shares"),
                                   ({"yaxis.title.text": us_title}, {"yaxis.title.text": share_title}))],
        margin={"t": 90},
    )  # fmt: skip
    return fig


def distributions_figure(d: ReportData, colors: dict[str, str]) -> go.Figure:
    """Per shape, a Tukey box per backend (every call) and its calls as points, spread left to right in time.

    A toggle switches to each call's deviation from its backend's median (%), where noise and drift of
    backends of very different speed show on one scale. :func:`distributions_spec`, checked by plotly.
    """
    return go.Figure(distributions_spec(d, colors))


def distributions_spec(d: ReportData, colors: dict[str, str]) -> dict[str, Any]:
    """:func:`distributions_figure` as plotly's figure dict, unchecked, as the page draws it (style.figure_html):
    plotly's check of each box and point trace as the figure takes it, and writing the checked figure, took
    0.15-0.21 s on the sweep benchmark trace's 192 traces (2 cores), writing this dict 0.03-0.04 s."""
    shapes = d.shapes
    cols = min(3, len(shapes))
    rows = math.ceil(len(shapes) / cols)
    fig = make_subplots(
        # long series names (a trace that is not a sweep) wrap rather than run into the next panel's title
        rows=rows, cols=cols, subplot_titles=[wrap_name(s, 45) for s in shapes],
        horizontal_spacing=0.07, vertical_spacing=min(0.12, 0.35 / max(1, rows - 1)) if rows > 1 else 0.1,
    )  # fmt: skip
    order = d.summary.select("shape", "backend").with_row_index("_order")
    boxes = d.boxes.join(order, on=["shape", "backend"]).sort("_order")
    points = d.strip.with_columns(
        (pl.col("gpu_span_ns") / 1e3).alias("t_us"),
        pl.int_range(pl.len()).over("shape", "backend").alias("_i"),
        pl.len().over("shape", "backend").alias("_n"),
    )
    # each (shape, backend)'s box and points in one pass, not two filters of every call per pair
    box_of = boxes.partition_by("shape", "backend", as_dict=True)
    points_of = points.partition_by("shape", "backend", as_dict=True)
    names_of = {key[0]: part["backend"].to_list() for key, part in boxes.partition_by("shape", as_dict=True).items()}
    traces: list[dict[str, Any]] = []
    visible: list[bool] = []
    for i, shape in enumerate(shapes):
        row, col = i // cols + 1, i % cols + 1
        panel = fig.get_subplot(row, col)  # the axes a trace names, as add_trace(row=, col=) sets them
        axes = {
            "xaxis": panel.xaxis.plotly_name.replace("axis", ""),
            "yaxis": panel.yaxis.plotly_name.replace("axis", ""),
        }
        names = names_of.get(shape, [])
        for pos, backend in enumerate(names):
            b = box_of[(shape, backend)].row(0, named=True)
            p = points_of.get((shape, backend), points.head(0))
            # x offset by time order: a drift over the run shows as a slope inside the box
            offset = (p["_i"] / (p["_n"] - 1).clip(lower_bound=1) - 0.5) * 0.6
            for relative in (False, True):
                scale = 100 / b["median"] if relative and b["median"] else 1.0
                shift = 100.0 if relative else 0.0

                def y(v: float, scale: float = scale, shift: float = shift) -> float:
                    return v * scale - shift

                unit = "% from median" if relative else "µs"
                traces.append(dict(
                    type="box", x=[pos], q1=[y(b["q1"])], median=[y(b["median"])], q3=[y(b["q3"])],
                    mean=[y(b["mean"])], lowerfence=[y(b["lowerfence"])], upperfence=[y(b["upperfence"])],
                    name=esc(backend), width=0.7, marker={"color": colors[backend]}, line={"width": 1.5},
                    fillcolor="rgba(0,0,0,0)", boxmean=True, showlegend=False, hoverinfo="y", visible=not relative,
                    **axes,
                ))  # fmt: skip
                hover = [
                    f"<b>{esc(backend)}</b> · {esc(shape)}<br>{esc(name)}<br>{us(t, 2)} µs ({t * 100 / b['median'] - 100:+.2f}%)"
                    for name, t in zip(p["name"], p["t_us"], strict=True)
                ]
                traces.append(dict(
                    type="scatter", x=(pos + offset).to_list(), y=(p["t_us"] * scale - shift).to_list(),
                    mode="markers", marker={"color": colors[backend], "size": 5, "opacity": 0.75}, showlegend=False,
                    name=unit, hovertext=hover, hovertemplate="%{hovertext}<extra></extra>", visible=not relative,
                    **axes,
                ))  # fmt: skip
                visible += [not relative] * 2
        fig.update_xaxes(
            tickmode="array", tickvals=list(range(len(names))), ticktext=[wrap_name(n, 24) for n in names],
            range=[-0.6, len(names) - 0.4], row=row, col=col,
        )  # fmt: skip
    first_col = [fig.get_subplot(r, 1).yaxis.plotly_name for r in range(1, rows + 1)]
    fig.update_yaxes(title_text="µs per call", col=1)
    fig.update_layout(
        template=TEMPLATE,
        # each panel's height, plus the lines its wrapped title and tick labels take
        height=110 + (260 + 14 * (_lines(shapes, 45) + _lines(d.summary["backend"].to_list(), 24) - 2)) * rows,
        margin={"t": 90},  # as the role bars': the unit buttons sit below the toolbar, not under it
        updatemenus=[_unit_buttons(visible, ("µs", "% from own median"),
                                   ({f"{a}.title.text": "µs per call" for a in first_col},
                                    {f"{a}.title.text": "% from median" for a in first_col}))],
    )  # fmt: skip
    return {"data": traces, "layout": fig.layout.to_plotly_json()}


def _lines(names: list[str], width: int) -> int:
    """How many lines the longest of *names* takes wrapped at *width* characters (:func:`wrap_name`)."""
    return max((wrap_name(n, width).count("<br>") + 1 for n in names), default=1)


def _unit_buttons(first: list[bool], labels: tuple[str, str], layouts: tuple[dict, dict]) -> dict:
    """Two buttons that switch a figure between two sets of traces (*first* visible, or the others)."""
    other = [not v for v in first]
    return {
        "type": "buttons", "direction": "right", "x": 1, "xanchor": "right", "y": 1.0, "yanchor": "bottom",
        "pad": {"b": 30}, "showactive": True, "font": {"size": 11},  # above legend and subplot titles
        "buttons": [
            {"label": labels[0], "method": "update", "args": [{"visible": first}, layouts[0]]},
            {"label": labels[1], "method": "update", "args": [{"visible": other}, layouts[1]]},
        ],
    }  # fmt: skip
