"""The page of a sweep (``traceattr report SWEEP_FOLDER``, or its sweep.json): the answer leads.

Order: the answer (the sweep's result in the words the terminal prints,
:func:`~traceattr.present.formats.sweep_text`, with a note where the record's own points now give
another answer, and where an arm's time falls as ctx grows); the decision chart with the bisection on
it (per measured ctx the ratio t(above) / t(below) with its 95% interval, labelled with its step,
filled where it passed its gates and a red cross where a gate refused it; the bracket shaded green, a
tie band grey, several crossings orange, the medians' crossing dotted), and the steps as a table; the
dispatch table built from the sweep's gated points with its regret (the table's choice against the
fastest per shape, "always X", leave-one-out, the graph-safe choice); last, folded, the sweep's
header. No trace is read: everything comes from sweep.json.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from traceattr.analysis.dispatch_table import FamilyTable, dispatch_table, lookup
from traceattr.analysis.stats import SAME_WITHIN
from traceattr.analysis.sweep_points import dispatch_frames, replay, time_falls
from traceattr.core.output import write_bytes
from traceattr.core.records import SweepPoint, SweepRecord
from traceattr.core.shapes import fmt_ctx
from traceattr.present.dispatch import regret_text, segments_text
from traceattr.present.formats import (
    ctx_span,
    decimals,
    pct,
    replay_text,
    sweep_text,
    time_fall_text,
    times_with_interval,
    us,
)
from traceattr.present.report.html import Section, facts_html, notes_html, page, plotly_js, run_html
from traceattr.present.report.style import backend_colors, esc, figure_html, new_figure

BRACKET_FILL, BAND_FILL, CROSSINGS_FILL = "rgba(26,127,55,0.12)", "rgba(120,120,120,0.18)", "rgba(230,120,0,0.16)"
TIE_COLOR, REFUSED_COLOR = "#9a7d00", "#cf222e"


def write_sweep_report(record: SweepRecord, path: Path, title: str) -> Path:
    """Write the page of *record* to *path* atomically; the path written."""
    return write_bytes(path, sweep_page(record, title))


def sweep_page(record: SweepRecord, title: str) -> bytes:
    """The page of a sweep (see the module doc) as one HTML document (UTF-8)."""
    h = record.header
    below, above = _sides(record)
    sections = [
        answer_section(record),
        Section(
            "sweep",
            "The sweep along context",
            f"Each measured context: {above}'s median time over {below}'s (log; below 1: {above} faster), with its "
            "95% interval over the paired calls, labelled with the step that measured it. Filled: the point "
            "passed every gate and was used; a red cross: a gate refused it (not used; measured once more). "
            f"Green: the bracket ({below} really faster at its left end, {above} at its right); grey: a band "
            "where neither is; orange: several changes of the faster arm; dotted: where the medians cross; the "
            "grey strip around 1: the same within ±1%. Below the chart, every step with its gates.",
            figure_html(sweep_figure(record), "fig-sweep") + steps_table(record),
        ),
        dispatch_section(record),
        metadata_section(record),
    ]
    mode = "graphs" if h.get("graphs") else "eager"
    lo, hi = h["ctx_range"]
    seconds = record.seconds
    subtitle = (f"{h['family']} · {mode} · {below} vs {above} · {ctx_span(lo, hi)} · {len(record.steps)} steps, "
                f"{decimals(seconds, 0)} s of capture")  # fmt: skip
    return page(title, f'<p class="subtitle">{html.escape(subtitle)}</p>', sections, plotly_js())


def _shown(record: SweepRecord) -> Mapping[str, Any] | None:
    """What the page reports: the result, or while unfinished the last step's decision."""
    if record.result is not None:
        return record.result
    return record.steps[-1]["decision"] if record.steps else None


def answer_section(record: SweepRecord) -> Section:
    notes = []
    now = replay(record)
    if record.result is not None and now is not None and now.to_json() != dict(record.result):
        notes.append(replay_text(sweep_text(record.header, now.to_json())))
    notes += [time_fall_text(*fall) for fall in time_falls(record)]
    sentence = sweep_text(record.header, record.result)
    return Section(
        "answer",
        "The answer",
        "Where the faster arm changes along context, as the sweep concluded it: a crossover bracketed to the "
        "width asked (or how far it got), a tie band, several crossovers, no crossover, or the point refused.",
        f'<ul class="rules"><li><b>{html.escape(sentence)}</b></li></ul>{notes_html(notes)}',  # the answer first
    )


def sweep_figure(record: SweepRecord) -> go.Figure:
    """The decision chart with the bisection steps on it (module doc)."""
    h = record.header
    below, above = _sides(record)
    colors = backend_colors([below, above])
    measured = [(s.step, p) for s in record.steps_taken for p in s.points if p.ratio]
    fig = new_figure(500, hovermode="closest", margin={"l": 70, "r": 30, "t": 40, "b": 110})
    kinds = (
        ("below", f"{below} really faster (passed)", colors.get(below), "circle"),
        ("above", f"{above} really faster (passed)", colors.get(above), "circle"),
        ("same", "the same within ±1% (passed)", TIE_COLOR, "circle-open"),
        ("ambiguous", "neither really faster (passed)", TIE_COLOR, "circle-open"),
        ("refused", "refused by a gate (not used)", REFUSED_COLOR, "x"),
    )
    for side, name, color, symbol in kinds:
        pts = [(step, p) for step, p in measured if p.side == side]
        if not pts:
            continue
        ratio = [p.ratio for _, p in pts]
        fig.add_trace(
            go.Scatter(
                x=[p.ctx for _, p in pts], y=ratio, mode="markers+text", name=esc(name),
                text=[str(step) for step, _ in pts],
                textposition="bottom center" if side == "refused" else "top center",
                textfont={"color": color, "size": 12},
                marker={"size": 12, "color": color, "symbol": symbol, "line": {"width": 2, "color": color}},
                error_y={"type": "data", "symmetric": False, "thickness": 1.2, "width": 5, "color": color,
                         "array": [_gap(p.high, p.ratio) for _, p in pts],
                         "arrayminus": [_gap(p.ratio, p.low) for _, p in pts]},
                hovertext=[_hover(step, p, below, above) for step, p in pts],
                hovertemplate="%{hovertext}<extra></extra>", meta=side,
            )
        )  # fmt: skip
    _shade(fig, _shown(record))
    fig.add_hrect(y0=1 - SAME_WITHIN, y1=1 + SAME_WITHIN, fillcolor="rgba(120,120,120,0.12)", line_width=0,
                  layer="below")  # fmt: skip
    fig.add_hline(y=1, line={"color": "#888", "width": 1})
    ctx = sorted({p.ctx for _, p in measured}) or [int(c) for c in h["ctx_range"]]
    ticks: list[int] = []
    for c in ctx:  # a tick at each measured ctx, thinned where they crowd
        if not ticks or c / ticks[-1] >= 1.12:
            ticks.append(c)
    fig.update_xaxes(type="log", range=[math.log10(min(ctx) / 1.3), math.log10(max(ctx) * 1.3)], tickvals=ticks,
                     ticktext=[fmt_ctx(c) for c in ticks], title_text="context length (tokens, log)",
                     title_standoff=6)  # fmt: skip
    ys = [v for _, p in measured for v in (p.low, p.high, p.ratio) if v and v > 0] or [1.0]
    bottom, top = min(min(ys), 1 - 2 * SAME_WITHIN) / 1.02, max(max(ys), 1 + 2 * SAME_WITHIN) * 1.02
    fig.update_yaxes(type="log", range=[math.log10(bottom), math.log10(top)],
                     title_text=f"{esc(above)} ÷ {esc(below)} (median time, log)")  # fmt: skip
    fig.update_layout(legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 0.01, "yanchor": "bottom",
                              "yref": "container"})  # fmt: skip
    return fig


def _gap(a: float | None, b: float | None) -> float:
    return 0.0 if a is None or b is None else max(a - b, 0.0)


def _sides(record: SweepRecord) -> tuple[str, str]:
    """(below, above) as the page names them; ``?`` before step 1 named them."""
    return str(record.below) if record.below else "?", str(record.above) if record.above else "?"


def _hover(step: int, p: SweepPoint, below: str, above: str) -> str:
    medians = p.medians_us
    gates = "passed every gate" if p.status == "pass" else f"refused: {p.refusal}"
    return (
        f"<b>step {step}</b> · {esc(p.shape)}<br>{esc(above)} ÷ {esc(below)}: "
        f"{times_with_interval(p.ratio, p.low, p.high, 3)} ({esc(p.verdict if p.verdict else '')})"
        f"<br>{esc(below)} {us(medians.get(below), 2)} µs, {esc(above)} {us(medians.get(above), 2)} µs<br>{esc(gates)}"
    )


def _shade(fig: go.Figure, shown: Mapping[str, Any] | None) -> None:
    """The bracket, band or crossings of the answer shown, and where the medians cross."""
    if not shown:
        return
    crossings = shown.get("crossings")
    several = crossings if crossings and shown["kind"] == "several crossovers" else ()
    for lo, hi in several:
        fig.add_vrect(x0=lo, x1=hi, fillcolor=CROSSINGS_FILL, line_width=0, layer="below")
    if shown.get("bracket"):
        lo, hi = shown["bracket"]
        fig.add_vrect(x0=lo, x1=hi, fillcolor=BRACKET_FILL, line_width=0, layer="below")
        fig.add_annotation(x=math.log10(math.sqrt(lo * hi)), y=1, xref="x", yref="paper", yanchor="bottom",
                           text=f"bracket {ctx_span(lo, hi)} (±{pct((hi - lo) / (hi + lo))})", showarrow=False,
                           font={"size": 11, "color": "#14532d"}, name="bracket")  # fmt: skip
    if shown.get("band"):
        lo, hi = shown["band"]
        fig.add_vrect(x0=lo * 0.98, x1=hi * 1.02, fillcolor=BAND_FILL, line_width=0, layer="below")
    if shown.get("estimate"):
        fig.add_vline(x=shown["estimate"], line={"color": "#1a7f37", "dash": "dot", "width": 1.5})


def steps_table(record: SweepRecord) -> str:
    """Every measured point by step: ctx, side, ratio with its interval, both medians, gates, the decision after."""
    below, above = _sides(record)
    head = ("step", "ctx", "shape", "side", f"{above} ÷ {below} [95%]", f"{below} µs", f"{above} µs", "gates",
            "then", "s")  # fmt: skip
    rows = []
    for s in record.steps_taken:
        d = s.decision
        then = f"measure {fmt_ctx(d['next_ctx'])}" if d.get("next_ctx") else d["kind"]
        for p in s.points:
            medians = p.medians_us
            gates = "pass" if p.status == "pass" else f"refused: {p.refusal}"
            cells = (str(s.step), fmt_ctx(p.ctx), p.shape, p.side, times_with_interval(p.ratio, p.low, p.high, 3),
                     us(medians.get(below), 2), us(medians.get(above), 2), gates, then,
                     decimals(s.seconds, 0))  # fmt: skip
            mark = ' class="refused"' if p.status != "pass" else ""
            rows.append(f"<tr{mark}>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    return _table("steps", head, rows)


def _table(css: str, head: tuple[str, ...], rows: list[str]) -> str:
    return (f'<div class="table-wrap"><table class="numbers {css}"><thead><tr>'
            f"{''.join(f'<th>{html.escape(x)}</th>' for x in head)}</tr></thead><tbody>{''.join(rows)}</tbody>"
            "</table></div>")  # fmt: skip


def dispatch_section(record: SweepRecord) -> Section:
    summary, crossings = dispatch_frames(record)
    table = dispatch_table(summary, crossings) if summary.height else None
    if table is None or not table.families:
        body = '<p class="hint">No point passed its gates: no dispatch table.</p>'
    else:
        body = "".join(_family_html(t, table.distribution) for t in table.families)
    return Section(
        "dispatch",
        "The dispatch table and its regret",
        "The table `traceattr dispatch` builds from this sweep (the points that passed, with the sweep's "
        "verdicts): per context the fastest median, a switch only where it is not a tie, breakpoints where the "
        "medians cross. Regret at a measured shape: t(choice) / t(fastest) − 1. The table at its own points, "
        "leave-one-out (each context predicted by the table of the others: how far it can be trusted between "
        "measured points; at the ends it extrapolates), and the fixed choices engines ship (always one backend). "
        "Right: the choice was the fastest or tied with it.",
        body,
    )


def _family_html(t: FamilyTable, distribution: str) -> str:
    choices = [("the table, at its own points", t.regret), ("leave-one-out", t.loo_regret),
               *((f"always {b}", r) for b, r in t.baselines.items())]  # fmt: skip
    regret_rows = [
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in
                         (name, pct(r.mean), pct(r.max), f"{r.right} / {r.shapes}")) + "</tr>"
        for name, r in choices
    ]  # fmt: skip
    held = {h.ctx: h for h in t.loo}
    shape_rows = []
    for p in t.points:
        choice = lookup(t.segments, p.ctx)
        h = held.get(p.ctx)
        cells = (fmt_ctx(p.ctx), p.shape, p.fastest, choice or "", pct(p.regret(choice)),
                 "" if h is None else (h.predicted or "") + (" (extrapolated)" if h.extrapolated else ""),
                 "" if h is None else pct(h.regret), "" if h is None else ("yes" if h.right else "no"))  # fmt: skip
        shape_rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    gs = t.graph_safe
    safe = "" if gs is None else (
        f"Graph-safe (one backend per CUDA-graph bucket, over {distribution}): {gs.backend}, {us(gs.expected_us)} µs "
        f"expected against {us(gs.per_ctx_us)} µs for the per-ctx table: +{pct(gs.expected_regret)} expected regret "
        f"(worst +{pct(gs.max_regret)}), what capturing graphs for both backends and dispatching by seq_len buys."
    )  # fmt: skip
    alone = (
        f'<div class="note">One measured context passed its gates ({fmt_ctx(t.points[0].ctx)}): the table is its '
        "fastest backend everywhere, and leave-one-out has nothing to hold out.</div>"
        if len(t.points) == 1
        else ""
    )
    return (
        alone + f'<ul class="rules"><li><b>{html.escape(t.family)}</b>: {html.escape(segments_text(t))}; table '
        f"{html.escape(regret_text(t.regret))}, leave-one-out {html.escape(regret_text(t.loo_regret))}</li></ul>"
        + _table("regret", ("choice", "mean regret", "max regret", "right / shapes"), regret_rows)
        + "<h3>Per measured shape</h3>"
        + _table(
            "per-shape",
            ("ctx", "shape", "fastest", "table's choice", "regret", "left out: predicted", "its regret", "right"),
            shape_rows,
        )
        + (f'<p class="intro">{html.escape(safe)}</p>' if safe else "")
    )


def metadata_section(record: SweepRecord) -> Section:
    h = record.header
    lo, hi = h["ctx_range"]
    argv = h.get("argv")
    facts = [
        ("family", str(h["family"])),
        ("arms", ", ".join(map(str, h["arms"]))),  # required in a sweep record
        ("below / above", f"{h.get('below')} / {h.get('above')} (the fastest at the low end / at the high end)"),
        ("context range", ctx_span(lo, hi)),
        ("width asked", f"±{pct(h['width'], 0)} of ctx"),
        ("step budget", f"{h['max_steps']} captures ({h.get('max_steps_from', 'recorded')})"),
        ("mode", "CUDA graphs" if h.get("graphs") else "eager"),
        ("steps run", f"{len(record.steps)}, {decimals(record.seconds, 0)} s"),
        ("traceattr", f"{h.get('version', '?')}: {' '.join(map(str, argv)) if argv else ''}"),
    ]
    details = facts_html(facts) + run_html({k: v for k, v in h.items() if k not in ("argv",)}).replace(
        "<details open>", "<details>"
    )
    folded = f"<details><summary>The sweep's header: range, protocol, gates</summary>{details}</details>"
    return Section("metadata", "Sweep metadata", "What was swept and how each step was captured.", folded)
