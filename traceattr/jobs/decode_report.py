"""The page of a decode trajectory (``traceattr report DECODE_FOLDER`` or its receipt JSON): the answer leads.

A job, not a view (as the round's page, :func:`traceattr.jobs.round.write_round_report`): it renders a
:class:`~traceattr.jobs.decode.DecodeResult` and the dispatcher's table (``runtime``), which the present layer
may not import, with the report's parts (:mod:`traceattr.present.report.html`, ``style``).

Rendered from a :class:`~traceattr.jobs.decode.DecodeResult` read back by
:func:`~traceattr.jobs.decode.result_from_json` (every summary recomputed from the raw times and checked
against the stored one), so the page and the receipt's markdown show the same numbers. Order: the answer
(each contender's total GPU time per pass with its 95% interval, the dispatcher's gain over the best fixed
arm and its regret against the per-step oracle, switches, graphs and memory, the other rules, bitwise
checks, the host time per step); the trajectory (per step every contender's median along ctx, the
dispatcher's chosen arm marked, its misses ringed), with the per-step numbers folded below; the timeline
of a few steps (each contender's call of iteration 0 side by side, kernels on their streams) when the nsys
export of the same run is given (the receipt holds durations, not kernel starts: without the export the
section says so); the table the dispatcher loaded; the run's configuration, folded.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from pathlib import Path

import plotly.graph_objects as go

from traceattr.attribution.engine import Attribution, RangeFilter, attribute
from traceattr.core.errors import TraceattrError
from traceattr.core.output import write_bytes
from traceattr.core.shapes import fmt_ctx
from traceattr.jobs.decode import DISPATCHER, DecodeResult, contender_memory_mib
from traceattr.jobs.decode_summary import Interval, TrajectorySummary
from traceattr.present.formats import segment_span
from traceattr.present.report.data import TimelineView, calls_timeline
from traceattr.present.report.figures_timeline import picker_html, timeline_spec
from traceattr.present.report.html import Section, facts_html, page, plotly_js, run_html
from traceattr.present.report.style import backend_colors, esc, figure_html, new_figure
from traceattr.runtime.table import DispatchTable, parse_table
from traceattr.trace.loader import load_trace

MISS_COLOR = "#cf222e"
ORACLE_COLOR = "#444444"
STEP_RANGE = re.compile(
    r"decode step=(\d+) arm=(\S+) (?:iter|round)=(\d+)"
)  # round=: before 2026-12  # runtime.measure's NVTX range per timed call
TIMELINE_STEPS = 6  # steps offered in the timeline: the ends, the switches, the misses, then evenly spaced


def write_decode_report(result: DecodeResult, path: Path, title: str, trace: Path | None = None) -> Path:
    """Write the page of *result* to *path* atomically (*trace*: the run's nsys export, for the timeline)."""
    return write_bytes(path, decode_page(result, title, trace))


def decode_page(result: DecodeResult, title: str, trace: Path | None = None) -> bytes:
    """The page of a decode receipt (module doc) as one HTML document (UTF-8)."""
    c, s = result.config, result.summary
    sections = [
        answer_section(result),
        Section(
            "trajectory",
            "Per step along the trajectory",
            "Each step's median GPU time over iterations (CUDA events around the replay), every contender. The "
            "dispatcher's markers take the colour of the arm it chose; a red ring: it chose another arm than the "
            "per-step oracle (the fastest fixed arm at that step, same capture). "
            + (
                "ctx is the step's key: the longest request of the batch."
                if c.trajectory in ("mix", "file")
                else "Each step is one request; its q is in the hover."
                if c.trajectory == "mixq"
                else "Every request of a step is at that ctx."
            ),
            figure_html(trajectory_figure(result), "fig-trajectory") + _steps_table(result),
        ),
        timeline_section(result, trace),
        table_section(result),
        config_section(result),
    ]
    subtitle = f"{_trajectory_text(result)} · {len(s.ctx)} steps · {c.iters} iterations · {_device_name(result)}"
    return page(title, f'<p class="subtitle">{html.escape(subtitle)}</p>', sections, plotly_js())


def _device_name(r: DecodeResult) -> str:
    return str(r.device["name"]) if "name" in r.device else "device not recorded"


def _table_of(r: DecodeResult) -> DispatchTable:
    """The receipt's table as the dispatcher loaded it (typed; result_from_json has parsed it once already)."""
    return parse_table(r.table_doc)


def _trajectory_text(r: DecodeResult) -> str:
    c = r.config
    q = f"q {'/'.join(map(str, c.mix_q))}" if c.mix_q else f"q{c.q}"
    source = f" ({c.seq_lens})" if c.seq_lens is not None else ""
    return f"{c.trajectory}{source}: {q} h{c.heads} b{c.batch}, ctx {c.start:,} → {c.stop:,}"


def _iv(v: Interval, digits: int = 1) -> str:
    """µs with its interval, as the receipt's markdown writes it."""
    return f"{v.value:,.{digits}f} [{v.lo:,.{digits}f}, {v.hi:,.{digits}f}]"


def _pct(v: Interval) -> str:
    return f"{v.value:+.2%} [{v.lo:+.2%}, {v.hi:+.2%}]"


def answer_sentence(r: DecodeResult) -> str:
    """The receipt's lead in one sentence (the markdown's, in words)."""
    s = r.summary
    return (
        f"Dispatcher {s.totals[DISPATCHER].value:,.1f} µs of GPU time per pass; best fixed arm {s.best_fixed} "
        f"{s.totals[s.best_fixed].value:,.1f} µs: gain {_pct(s.gain)}; regret against the per-step oracle "
        f"{_pct(s.regret)}; {s.switches} switch{'es' if s.switches != 1 else ''}; the oracle's arm at "
        f"{s.right}/{len(s.ctx)} steps."
    )


def answer_section(r: DecodeResult) -> Section:
    s = r.summary
    rows = []
    for label, total in s.totals.items():
        gain = "" if label == DISPATCHER else _pct(s.gain_vs[label])
        cls = ' class="win"' if label == DISPATCHER else ""
        rows.append((cls, (label, _iv(total), gain, str(r.graphs[label]), f"{contender_memory_mib(r, label):,.0f}")))
    rows.append(("", ("oracle (fastest fixed arm per step)", _iv(s.oracle), "", "", "")))
    for label, o in r.others.items():
        rows.append(("", (f"{label} (rule {label.split('-', 1)[1]}, the same table)", _iv(o.totals[label]),
                          f"over best fixed {_pct(o.gain)}; regret {_pct(o.regret)}; {o.switches} switches; "
                          f"right {o.right}/{len(o.ctx)}", str(r.graphs[label]),
                          f"{contender_memory_mib(r, label):,.0f}")))  # fmt: skip
    totals = _table(
        "totals",
        ("contender", "total GPU µs per pass [95%]", "dispatcher's gain over it [95%]", "graphs",
         "memory MiB (reserved + driver)"),
        rows,
    )  # fmt: skip
    checks = [f"{label}: {sum(eq)}/{len(eq)} steps bitwise equal" for label, eq in r.equal.items() if eq]
    if not checks:
        why = "--no-verify" if r.config.batch == 1 else f"batch {r.config.batch}: eager and slot layouts differ"
        checks = [f"no bitwise check in this run ({why})"]
    body = (
        f'<ul class="rules"><li><b>{html.escape(answer_sentence(r))}</b></li>'
        f"<li>The dispatcher's choices alone, from the fixed arms' medians: {s.modelled_regret:+.2%} against the "
        "oracle.</li>"
        f"<li>{html.escape('; '.join(checks))}.</li></ul>" + totals + "<h3>Host time per step (the dispatcher, µs)</h3>"
        '<p class="intro">choose, re-plan and launch are medians, the rest means per step; pipelined: step k+1 '
        "prepared while the GPU runs step k.</p>" + _host_table(r)
    )
    return Section(
        "answer",
        "The answer",
        "Total = Σ over steps of each contender's median over iterations (one pass over the trajectory); gain = 1 − "
        "dispatcher / that arm; regret = dispatcher / oracle − 1; intervals: 95% percentile bootstrap over whole "
        "iterations, contenders paired.",
        body,
    )


def _host_table(r: DecodeResult) -> str:
    rows = []
    for h in r.host:
        replan = ", ".join(f"{a} {v:,.0f}" for a, v in h["replan_us"].items())
        rows.append(("", (str(h["layers"]), f"{h['choose_us']:.2f}", replan, f"{h['launch_us']:.1f}",
                          f"{h['host_mean_us']:,.0f}", f"{h['gpu_mean_us']:,.0f}", f"{h['serial_wall_mean_us']:,.0f}",
                          f"{h['pipelined_wall_mean_us']:,.0f}", f"{h['choose_loop_ns']:.0f}")))  # fmt: skip
    if not rows:
        return '<p class="hint">The receipt holds no host profile.</p>'
    head = ("layers per plan", "choose", "re-plan (per arm)", "launch (all replays)", "host total", "GPU",
            "serialized wall", "pipelined wall", "choose() alone, ns")  # fmt: skip
    return _table("host", head, rows)


def _table(css: str, head: Sequence[str], rows: Sequence[tuple[str, Sequence[str]]]) -> str:
    """A table of plain-text cells (escaped); each row with its class attribute (trusted, ours)."""
    body = "".join(f"<tr{cls}>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>" for cls, cells in rows)
    return (f'<div class="table-wrap"><table class="numbers {css}"><thead><tr>'
            f"{''.join(f'<th>{html.escape(x)}</th>' for x in head)}</tr></thead><tbody>{body}</tbody>"
            "</table></div>")  # fmt: skip


def _dispatchers(r: DecodeResult) -> list[tuple[str, TrajectorySummary]]:
    """(label, summary) of every dispatcher: the receipt's, then one per other rule."""
    return [(DISPATCHER, r.summary), *r.others.items()]


def trajectory_figure(r: DecodeResult) -> go.Figure:
    """Per step every contender's median (µs) against ctx (log), the dispatchers' chosen arms marked."""
    s = r.summary
    colors = backend_colors(s.fixed)
    ordered = sorted(range(len(s.ctx)), key=lambda i: (s.ctx[i], i))
    lines = r.config.trajectory == "grow"  # ragged and mixed-q steps are not a curve in ctx: markers only
    hover_q = [f"q{step[0]} · " if r.config.mix_q else "" for step in r.steps]
    fig = new_figure(520, hovermode="closest", margin={"l": 70, "r": 30, "t": 40, "b": 60})
    for arm in s.fixed:
        fig.add_trace(go.Scatter(
            x=[s.ctx[i] for i in ordered], y=[s.medians[arm][i] for i in ordered], name=esc(arm),
            mode="lines+markers" if lines else "markers", line={"color": colors[arm], "width": 1.5},
            marker={"color": colors[arm], "size": 6, "symbol": "circle-open"},
            hovertext=[f"{hover_q[i]}step {i} · ctx {s.ctx[i]:,}<br>{esc(arm)} {s.medians[arm][i]:,.1f} µs"
                       for i in ordered],
            hovertemplate="%{hovertext}<extra></extra>", meta=arm,
        ))  # fmt: skip
    symbols = ("diamond", "square", "triangle-up", "cross")
    for n, (label, d) in enumerate(_dispatchers(r)):
        times = d.medians[label]
        fig.add_trace(go.Scatter(
            x=[d.ctx[i] for i in ordered], y=[times[i] for i in ordered], name=esc(f"{label} (colour: its choice)"),
            mode="lines+markers" if lines else "markers", line={"color": "#222", "width": 1, "dash": "dot"},
            marker={"color": [colors.get(d.chosen[i], "#222") for i in ordered], "size": 10,
                    "symbol": symbols[n % len(symbols)],
                    "line": {"width": [2.5 if d.chosen[i] != d.fastest[i] else 0.5 for i in ordered],
                             "color": [MISS_COLOR if d.chosen[i] != d.fastest[i] else "#222" for i in ordered]}},
            hovertext=[f"{hover_q[i]}step {i} · ctx {d.ctx[i]:,}<br>{esc(label)} {times[i]:,.1f} µs, chose "
                       f"{esc(d.chosen[i])}<br>fastest fixed arm: {esc(d.fastest[i])}"
                       f" ({d.medians[d.fastest[i]][i]:,.1f} µs)" for i in ordered],
            hovertemplate="%{hovertext}<extra></extra>", meta=label,
        ))  # fmt: skip
    for seg in _cuts(r):
        fig.add_vline(x=seg, line={"color": ORACLE_COLOR, "dash": "dash", "width": 1})
    lo, hi = min(s.ctx), max(s.ctx)
    ticks = _ticks(sorted(set(s.ctx)))
    fig.update_xaxes(type="log", range=[math.log10(lo / 1.15), math.log10(hi * 1.15)], tickvals=ticks,
                     ticktext=[fmt_ctx(t) for t in ticks], title_text="context length (tokens, log)")  # fmt: skip
    fig.update_yaxes(title_text="median GPU time per step (µs)", rangemode="tozero")
    return fig


def _cuts(r: DecodeResult) -> list[int]:
    """The table's breakpoints inside the trajectory's ctx range (dashed on the figure), of one family only."""
    fams = _table_of(r).families
    if len(fams) != 1:
        return []  # mixq: one family per q, their breakpoints differ; the hover says which arm each step chose
    lo, hi = min(r.summary.ctx), max(r.summary.ctx)
    return [seg.ctx_from for seg in fams[0].segments if seg.ctx_from is not None and lo <= seg.ctx_from <= hi]


def _ticks(ctx: Sequence[int]) -> list[int]:
    ticks: list[int] = []
    for c in ctx:  # a tick at each step's ctx, thinned where they crowd
        if not ticks or c / ticks[-1] >= 1.5:
            ticks.append(c)
    return ticks


def _steps_table(r: DecodeResult) -> str:
    s = r.summary
    labels = list(s.medians)
    rows = []
    for i, ctx in enumerate(s.ctx):
        where = f"q{r.steps[i][0]} {ctx:,}" if r.config.mix_q else f"{ctx:,}"
        right = "yes" if s.chosen[i] == s.fastest[i] else "no"
        rows.append(
            ("", (str(i), where, *(f"{s.medians[k][i]:.1f}" for k in labels), s.chosen[i], s.fastest[i], right))
        )
    head = ("step", "ctx", *(f"{k} µs" for k in labels), "chosen", "fastest", "right")
    table = _table("per-step", head, rows)
    return f"<details><summary>Per step (medians over iterations, µs)</summary>{table}</details>"


MISSING = (
    "the receipt holds each call's duration (a CUDA event pair around one graph replay), not when its kernels "
    "ran. For the timeline run the trajectory under nsys (nsys profile --trace=cuda,nvtx --cuda-graph-trace=node "
    "--capture-range=cudaProfilerApi traceattr decode …) and put the export beside the receipt as NAME.sqlite "
    "or NAME.sqlite.xz (examples/decode/q8_nsys.sqlite.xz is one)."
)


def timeline_section(r: DecodeResult, trace: Path | None) -> Section:
    """A few steps' calls side by side, from *trace*; else what is missing for them."""
    title, intro = (
        "Timeline of a few steps",
        (
            "Per step, each contender's call of iteration 0 side by side (lanes: contender │ device · stream), µs from "
            "the call's first GPU op, kernels coloured by role, the NVTX range of the call above them; the picker "
            "offers the first and last steps, the dispatcher's switches and misses."
        ),
    )
    if trace is None:
        shape = f"{len(r.times_us)} contenders × {len(r.summary.ctx)} steps"
        return Section("timeline", title, f"Not drawn: {MISSING} ({shape} in this receipt.)", "")
    try:
        att = attribute(load_trace(trace), select=RangeFilter(None, STEP_RANGE.pattern))
        views, total = step_views(att, r)
    except TraceattrError as err:
        return Section("timeline", title, "Not drawn.", "", notes=(f"{err}",))
    data = calls_timeline(att, views, total)
    body = picker_html(data, "fig-timeline") + figure_html(timeline_spec(data), "fig-timeline")
    return Section("timeline", title, f"{intro} From {trace.name}.", body)


def step_views(att: Attribution, r: DecodeResult) -> tuple[tuple[TimelineView, ...], int]:
    """(one view per step offered, every timed call of the trace): the trace must be this receipt's run."""
    calls: dict[tuple[int, str, int], int] = {}
    for rid, name in att.ranges.filter(att.ranges["range_id"].is_not_null()).select("range_id", "name").iter_rows():
        m = STEP_RANGE.fullmatch(name or "")
        if m:
            calls[(int(m[1]), m[2], int(m[3]))] = rid
    if not calls:
        raise TraceattrError("the trace has no NVTX range 'decode step=<i> arm=<label> iter=<r>': no timeline")
    s = r.summary
    contenders = [*s.totals, *r.others]
    iters = len(r.times_us[DISPATCHER][0])
    want = {(i, a, k) for i in range(len(s.ctx)) for a in contenders for k in range(iters)}
    if set(calls) != want:  # traceattr decode times the whole trajectory inside one capture range
        raise TraceattrError(f"the trace is not this receipt's run: {len(calls):,} timed calls, the receipt "
                             f"{len(want):,} ({len(s.ctx)} steps × {len(contenders)} contenders × {iters} "
                             "iterations): no timeline")  # fmt: skip
    steps = _few_steps(s, {step for step, _, _ in calls})
    views = []
    for i in steps:
        miss = "" if s.chosen[i] == s.fastest[i] else f"; the oracle: {s.fastest[i]}"
        views.append(TimelineView(
            label=f"step {i}: ctx {s.ctx[i]:,}, the dispatcher chose {s.chosen[i]}{miss}",
            group="Steps (iteration 0)",
            calls=tuple((calls[(i, a, 0)], f"{a} │ ") for a in contenders if (i, a, 0) in calls),
        ))  # fmt: skip
    return tuple(v for v in views if v.calls), len(calls)


def _few_steps(s: TrajectorySummary, measured: set[int]) -> list[int]:
    """At most TIMELINE_STEPS of the *measured* steps: the ends, each switch, each miss, then evenly spaced."""
    n = len(s.ctx)
    switches = [i for i in range(1, n) if s.chosen[i] != s.chosen[i - 1]]
    misses = [i for i in range(n) if s.chosen[i] != s.fastest[i]]
    even = [round(k * (n - 1) / (TIMELINE_STEPS - 1)) for k in range(TIMELINE_STEPS)]
    out: list[int] = []
    for i in (0, n - 1, *switches, *misses, *even):
        if i in measured and i not in out and len(out) < TIMELINE_STEPS:
            out.append(i)
    return sorted(out)


def table_section(r: DecodeResult) -> Section:
    table = _table_of(r)
    items = [
        f"<li><b>{html.escape(f.family)}</b>: "
        + html.escape(", ".join(f"{seg.arm} {segment_span(seg.ctx_from, seg.ctx_to)}" for seg in f.segments))
        + "</li>"
        for f in table.families
    ]
    grid = ""
    if r.grid is not None:
        grid = (
            '<p class="intro">Derived in this run from a quick grid (fixed arms only, same protocol) at ctx '
            + html.escape(", ".join(f"{x:,}" for x in r.grid["ctx"]))
            + "; the trajectory's steps are other ctx.</p>"
        )
    return Section(
        "table",
        "The table the dispatcher loaded",
        f"{r.table_source}; mode {table.mode}. Per step the batch is looked up at its key ctx by the rule "
        f"({', '.join(r.config.rules)}).",
        f'<ul class="rules">{"".join(items)}</ul>{grid}',
    )


def config_section(r: DecodeResult) -> Section:
    c = r.config
    facts = [
        ("trajectory", _trajectory_text(r)),
        ("arms", ", ".join(c.arms)),
        ("rules", ", ".join(c.rules)),
        ("protocol", f"{c.iters} iterations per step (order reversed every other iteration), {c.flush_bytes >> 20} MiB "
                     f"flush before each call, graphs captured at ctx {c.capture_ctx:,}"),
        ("wall time", f"{r.wall_s:,.1f} s"),
    ]  # fmt: skip
    device = run_html(r.device).replace("<details open>", "<details>")
    return Section(
        "config",
        "Run",
        "What ran, on what.",
        facts_html(facts) + device,
    )
