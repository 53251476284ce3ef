"""The timeline: one call's GPU ops as bars on their device/stream lanes, NVTX ranges above.

Every picker entry (a view) is drawn into the one figure up front, hidden
except the first; the page's ``<select>`` shows another view by switching
trace visibility and the lane axis (``Plotly.update``), so no view needs the
trace or Python again. Each trace carries its view index in ``meta``; the
lanes, x range and height of each view live in ``layout.meta.views``.
"""

from __future__ import annotations

import html
from collections import defaultdict
from typing import Any

import plotly.graph_objects as go
import polars as pl

from traceattr.attribution.roles import ROLES
from traceattr.present.formats import us
from traceattr.present.names import display_name
from traceattr.present.report.data import TimelineData
from traceattr.present.report.style import NVTX_COLOR, ROLE_COLORS, esc, new_figure, wrap_name

LANE_PX = 30
BAR_WIDTH = 0.76  # of a lane
MIN_HEIGHT = 240


def timeline_figure(t: TimelineData) -> go.Figure:
    """All views of *t* in one figure, the first visible: :func:`timeline_spec`, checked by plotly."""
    return go.Figure(timeline_spec(t))


def timeline_spec(t: TimelineData) -> dict[str, Any]:
    """:func:`timeline_figure` as plotly's figure dict, unchecked, as the page draws it (style.figure_html): plotly
    checks each bar trace's every property as a figure takes it: on the sweep benchmark trace, checking and writing
    took 0.12-0.13 s, writing this dict 0.005 s (2 cores); the tests check the same dict through
    :func:`timeline_figure`."""
    members = pl.DataFrame(
        [(v, cid, prefix) for v, view in enumerate(t.views) for cid, prefix in view.calls],
        schema={"view": pl.Int64, "call_id": pl.Int64, "prefix": pl.String},
        orient="row",
    ).with_row_index("_slot")  # the order of calls inside a view: lanes follow it
    ops = members.join(t.ops, on="call_id").with_columns((pl.col("prefix") + pl.col("lane")).alias("lane"))
    nvtx = members.join(t.ranges, on="call_id").with_columns((pl.col("prefix") + pl.col("lane")).alias("lane"))
    lanes = _lanes(ops, nvtx)

    fig = new_figure(MIN_HEIGHT, barmode="overlay", bargap=0.25, hovermode="closest")
    # every view's bars as plain dicts (the sweep: ~700 traces)
    traces: list[dict[str, Any]] = []
    views_meta: list[dict[str, Any]] = []
    # each view's rows, and each role's of them, in their order: one pass, not a filter per view and role
    none = ops.head(0)
    op_parts = ops.partition_by("view", "role", as_dict=True, maintain_order=True)
    nvtx_parts = nvtx.partition_by("view", as_dict=True, maintain_order=True)
    for v, view in enumerate(t.views):
        view_ops = [op_parts.get((v, role), none) for role in ROLES]
        view_nvtx = nvtx_parts.get((v,), nvtx.head(0))
        for role, part in zip(ROLES, view_ops, strict=True):
            if part.height:
                traces.append(
                    _bars(part, name=role, color=ROLE_COLORS[role], hover=_op_hover(part), view=v, first=v == 0)
                )
        if view_nvtx.height:
            bars = _bars(view_nvtx, name="NVTX range", color=NVTX_COLOR, hover=_range_hover(view_nvtx), view=v,
                         first=v == 0)  # fmt: skip
            bars.update(text=[esc(_clip(n, 60)) for n in view_nvtx["name"].to_list()], textposition="inside",
                        insidetextanchor="start", textfont={"color": "#333", "size": 10})  # fmt: skip
            traces.append(bars)
        view_lanes = [esc(lane) for lane in lanes.get(v, [])]
        ends = pl.concat([p.select("x0_us", "dur_us") for p in (*view_ops, view_nvtx)])
        lo = min(0.0, ends["x0_us"].min() or 0.0)  # type: ignore[arg-type]
        hi = max((ends["x0_us"] + ends["dur_us"]).max() or 1.0, 1e-3)  # type: ignore[arg-type]
        pad = 0.02 * (hi - lo)
        views_meta.append({
            "lanes": view_lanes,
            "x": [lo - pad, hi + pad],
            "height": max(MIN_HEIGHT, 130 + LANE_PX * len(view_lanes)),
            "title": esc(f"{view.group} — {view.label}"),
        })  # fmt: skip
    first = views_meta[0] if views_meta else {"lanes": [], "x": [0, 1], "height": MIN_HEIGHT, "title": ""}
    fig.update_layout(
        meta={"views": views_meta},
        height=first["height"],
        title={"text": first["title"], "font": {"size": 13}},
        xaxis={"title": {"text": "µs since the call's first GPU op"}, "range": first["x"], "zeroline": True},
        yaxis={"type": "category", "categoryorder": "array", "categoryarray": first["lanes"],
               "range": [len(first["lanes"]) - 0.5, -0.5], "autorange": False},
        legend={"traceorder": "normal"},
        margin={"t": 70},
    )  # fmt: skip
    return {"data": traces, "layout": fig.layout.to_plotly_json()}


def picker_html(t: TimelineData, figure_id: str) -> str:
    """The ``<select>`` that switches views of the timeline figure *figure_id* (optgroups by view group)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for v, view in enumerate(t.views):
        groups[view.group].append(f'<option value="{v}">{html.escape(view.label)}</option>')
    body = "".join(
        f'<optgroup label="{html.escape(group)}">{"".join(options)}</optgroup>' for group, options in groups.items()
    )
    return (
        f'<label class="picker">Show <select data-views="{figure_id}" aria-label="timeline view">{body}</select>'
        f'</label> <span class="hint">{t.calls_shown:,} of {t.calls_total:,} calls offered</span>'
    )


def _lanes(ops: pl.DataFrame, nvtx: pl.DataFrame) -> dict[int, list[str]]:
    """Lane order per view: for each call in view order, its NVTX lanes (outer first), then device/stream."""
    keyed = pl.concat(
        [
            nvtx.select(
                "view",
                "_slot",
                pl.lit(0).alias("_kind"),
                pl.col("depth").alias("_a"),
                pl.lit(0, pl.Int64).alias("_b"),
                "lane",
            ),
            ops.select(
                "view",
                "_slot",
                pl.lit(1).alias("_kind"),
                pl.col("device_id").cast(pl.Int64).alias("_a"),
                pl.col("stream_id").cast(pl.Int64).alias("_b"),
                "lane",
            ),
        ]
    )
    ordered = keyed.unique(["view", "lane"]).sort("view", "_slot", "_kind", "_a", "_b", "lane", nulls_last=True)
    out: dict[int, list[str]] = {}
    for view, lane in ordered.select("view", "lane").iter_rows():
        out.setdefault(view, []).append(lane)
    return out


def _bars(part: pl.DataFrame, *, name: str, color: str, hover: list[str], view: int, first: bool) -> dict[str, Any]:
    """Horizontal bars on their lanes (a bar trace's properties); ops on a lane with overlapping ops share its
    height in tiers."""
    if "tier" in part.columns:
        width = (BAR_WIDTH / part["tiers"]).to_list()
        offset = (-BAR_WIDTH / 2 + part["tier"] * BAR_WIDTH / part["tiers"]).to_list()
    else:
        width, offset = [BAR_WIDTH] * part.height, [-BAR_WIDTH / 2] * part.height
    return dict(
        type="bar",
        orientation="h",
        y=[esc(lane) for lane in part["lane"].to_list()],
        x=part["dur_us"].to_list(),
        base=part["x0_us"].to_list(),
        width=width,
        offset=offset,
        name=name,
        legendgroup=name,
        marker={"color": color, "line": {"color": color, "width": 1}},  # an outline: a 1 µs kernel stays visible
        hovertext=hover,
        hovertemplate="%{hovertext}<extra></extra>",
        visible=first,
        meta=view,
    )


def _op_hover(part: pl.DataFrame) -> list[str]:
    """Hover text per op: short and full (escaped) name, role, time, launch configuration."""
    names = {n: (esc(display_name(n)), wrap_name(n)) for n in part["name"].unique().to_list() if n}
    out = []
    for r in part.iter_rows(named=True):  # the drawn ops of one view: capped by Limits
        short, full = names.get(r["name"], ("?", ""))
        lines = [f"<b>{short}</b>", full, f"role <b>{r['role']}</b> · {esc(r['family'] or r['kind'])}",
                 f"{us(r['dur_us'], 2)} µs, from +{us(r['x0_us'], 2)} µs"
                 + (f" · overlaps the op before by {us(r['overlap_us'], 2)} µs" if r["overlap_us"] else "")]  # fmt: skip
        if r["kind"] == "kernel":
            smem = (r["static_smem"] or 0) + (r["dynamic_smem"] or 0)
            lines.append(
                f"grid ({r['grid_x']}, {r['grid_y']}, {r['grid_z']}) · block ({r['block_x']}, {r['block_y']}, "
                f"{r['block_z']}) · {r['registers_per_thread']} regs · {smem / 1024:,.1f} KiB smem"
            )
        elif r["bytes"] is not None:
            lines.append(f"{r['bytes']:,} bytes")
        lines.append(f"{esc(r['lane'])} · range {esc(_clip(r['range_name'], 90))}")
        out.append("<br>".join(line for line in lines if line))
    return out


def _range_hover(part: pl.DataFrame) -> list[str]:
    return [
        f"<b>{wrap_name(r['name'])}</b><br>GPU projection {us(r['dur_us'], 2)} µs from +{us(r['x0_us'], 2)} µs"
        f"<br>CPU range {us(r['cpu_us'], 2)} µs · launch latency {us(r['launch_us'] or 0, 2)} µs{_launch_split(r)}"
        f" · {r['gpu_ops']} GPU ops"
        for r in part.iter_rows(named=True)
    ]


def _launch_split(r: dict) -> str:
    """`` (overhead x + queue wait y)`` for a call's own range; empty for its nested ranges."""
    if r.get("launch_overhead_us") is None or r.get("queue_wait_us") is None:
        return ""
    return f" (launch overhead {us(r['launch_overhead_us'], 2)} + queue wait {us(r['queue_wait_us'], 2)})"


def _clip(text: str | None, width: int) -> str:
    text = text or ""
    return text if len(text) <= width else text[: width - 1] + "…"
