"""One look for every figure: role colours (backend colours: :mod:`traceattr.present.palette`), the plotly template, escaping.

Every user string that reaches plotly (kernel and NVTX names, backend and
shape labels) goes through :func:`esc` first: plotly.js renders a subset of
HTML in hover labels, ticks and annotations, so an unescaped ``<script>`` in
a name would be markup rather than text.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from traceattr.attribution.roles import ROLES
from traceattr.present.names import name_lines
from traceattr.present.palette import backend_colors as backend_colors  # one palette, keyed by name

GAPS = "gaps"
OVERLAP = "overlap"
# stacked parts of a call's span, bottom up: each role's exposed time, then overlap and gaps
SEGMENTS: tuple[str, ...] = (*ROLES, OVERLAP, GAPS)


def segment_part(segment: str) -> str:
    """The summary's name of a segment's part: ``gap``, ``overlap`` or ``<role>_exposed``."""
    return {GAPS: "gap", OVERLAP: "overlap"}.get(segment, f"{segment}_exposed")


def segment_pattern(segment: str) -> dict[str, object] | None:
    """The fill pattern of a segment that is not a role: gaps hatched, overlap cross-hatched."""
    if segment == GAPS:  # idle GPU time inside the call: not a kernel
        return {"shape": "/", "fgcolor": "#8c8c8c", "solidity": 0.3}
    if segment == OVERLAP:  # two roles at once: it belongs to neither alone
        return {"shape": "x", "fgcolor": "#bbbbbb", "solidity": 0.4}
    return None


# Fixed role -> colour map, the same in every figure. Attention is blue and
# reduce a loud orange, so a separate combine kernel (FlashMLA, trtllm-gen)
# stands out against single-kernel backends that merge in-kernel (fa3).
ROLE_COLORS: dict[str, str] = {
    "attention": "#3366aa",
    "reduce": "#ee7722",
    "schedule": "#33a02c",
    "flush": "#a6a6a6",
    "copy": "#9c4f96",
    "other": "#8c6d31",
    OVERLAP: "#4d4d4d",
    GAPS: "#d9d9d9",
}
NVTX_COLOR = "rgba(120, 120, 120, 0.35)"
PLOT_CONFIG: dict[str, Any] = {"displaylogo": False, "responsive": True}

TEMPLATE = go.layout.Template(
    layout={
        "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12, "color": "#222"},
        "paper_bgcolor": "white",
        "plot_bgcolor": "#fbfbfb",
        "hoverlabel": {"align": "left", "font": {"family": "ui-monospace, Menlo, Consolas, monospace", "size": 11}},
        "margin": {"l": 60, "r": 20, "t": 40, "b": 50},
        "xaxis": {"gridcolor": "#e6e6e6", "zerolinecolor": "#bbbbbb", "automargin": True},
        "yaxis": {"gridcolor": "#e6e6e6", "zerolinecolor": "#bbbbbb", "automargin": True},
        "legend": {"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "left", "x": 0},
    }
)


def esc(text: object) -> str:
    """*text* safe for plotly labels and HTML text nodes (``<``, ``>``, ``&`` escaped)."""
    return html.escape("" if text is None else str(text), quote=False)


def wrap_name(name: str | None, width: int = 110) -> str:
    """A long (C++) name as escaped label or hover text, in lines of about *width* characters broken only after a
    separator or at a space (:func:`~traceattr.present.names.name_lines`), never mid-word."""
    if not name:
        return ""
    # wrap first, escape each piece: an entity is never cut in two
    return "<br>".join(esc(line) for line in name_lines(name, width))


def new_figure(height: int, **layout: Any) -> go.Figure:
    """An empty figure on the report's template."""
    return go.Figure(layout={"template": TEMPLATE, "height": height, **layout})


def figure_html(fig: go.Figure | Mapping[str, Any], div_id: str) -> str:
    """The figure as a ``<div>`` and its ``Plotly.newPlot`` script; plotly.js is embedded once by the page. A
    figure given as plotly's dict (``{"data": [...], "layout": {...}}``, e.g. figures_timeline.timeline_spec) is
    written as it is, unchecked."""
    checked = isinstance(fig, go.Figure)
    height = fig.layout.height if checked else fig["layout"].get("height")
    return pio.to_html(
        fig,
        include_plotlyjs=False,
        include_mathjax=False,
        full_html=False,
        div_id=div_id,
        config=PLOT_CONFIG,
        default_width="100%",
        default_height=f"{height or 450}px",
        validate=checked,
    )
