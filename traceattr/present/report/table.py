"""The numbers table: one row per (shape, backend), sortable by any column in the page.

A plain HTML table rather than a plot, so it can be read, copied and
searched. Each numeric cell carries its raw value in ``data-v`` for sorting;
every text cell is escaped. The columns a decision reads (times, ratio,
roofline, where the time goes) make the table; the secondary ones (launch,
queue, stream idle, busy, cv, CUDA events, rounds) a second table folded
under it, so the first fits 1,600 px.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from traceattr.analysis.rounds import Receipt
from traceattr.attribution.roles import ROLES
from traceattr.present.formats import count, decimals, interval, pct, roofline_share, signed_pct, tie_text, times, us
from traceattr.present.receipt import row_verdict


@dataclass(frozen=True)
class Column:
    key: str
    head: str
    tip: str
    fmt: Callable[[dict], str]
    value: Callable[[dict], float | str | None]


def _num(key: str, head: str, tip: str, col: str) -> Column:
    return Column(key, head, tip, lambda r: us(r[col]), lambda r: r[col])


def _events(r: dict) -> str:
    if r["event_us"] is None:
        return ""
    return f"{us(r['event_us'])} ({signed_pct(r['event_vs_span'], 0)})"


def _event_parts(r: dict) -> str:
    if r["event_minus_span_us"] is None or r["event_lead_us"] is None:
        return ""
    return f"{us(r['event_minus_span_us'])} = {us(r['event_lead_us'])} + {us(r['event_tail_us'])}"


def _columns(summary: pl.DataFrame, peak_note: str) -> list[Column]:
    cols = [
        Column("shape", "shape", "the call's shape (q, ctx, heads, …)", lambda r: html.escape(r["shape"]), lambda r: r["shape"]),
        Column("backend", "backend", "", lambda r: html.escape(r["backend"]), lambda r: r["backend"]),
        Column("calls", "calls", "measured calls", lambda r: count(r["calls"]), lambda r: r["calls"]),
        Column("median", "median µs", "median GPU span per call: first kernel start to last kernel end",
               lambda r: f"<b>{us(r['median_us'], 2)}</b>", lambda r: r["median_us"]),
        Column("spread", "p10–p90 µs", "10th to 90th percentile of the span",
               lambda r: f"{us(r['p10_us'])}–{us(r['p90_us'])}", lambda r: r["p90_us"] - r["p10_us"]),
        Column("ratio", "× best", "median / the fastest backend's median at this shape",
               lambda r: times(r["ratio_to_best"]), lambda r: r["ratio_to_best"]),
        Column("roofline", "roofline", "share of the roofline bound that applies: memory (bytes the shape must move "
               "/ bandwidth) or compute (its FLOPs / the dense peak for its dtype), whichever is longer; ⚑: above "
               f"the bound, so a peak or the shape is wrong; {peak_note}", _roofline, lambda r: r["roofline"]),
        Column("kernels", "kernels", "kernels per call (median)", lambda r: f"{r['kernels']:g}", lambda r: r["kernels"]),
    ]  # fmt: skip
    parts = " (median per call; exposed parts, overlap and gaps add up to each call's span)"
    for seg in (*ROLES, "overlap"):
        part = "overlap" if seg == "overlap" else f"{seg}_exposed"
        if (summary[f"{part}_us"].fill_null(0) > 0).any():
            what = "time ops of two or more roles run at once" if seg == "overlap" else f"time only {seg} ops run"
            cols.append(_num(part, f"{seg} µs", what + parts, f"{part}_us"))
    cols.append(_num("gaps", "gaps µs", "time nothing runs inside the span" + parts, "gap_us"))
    if summary["iterations"].drop_nulls().len():
        cols.append(Column("iterations", "iteration wins", "ABBA iterations in which this backend was the fastest",
                           lambda r: "" if r["iterations"] is None else f"{r['iteration_wins']}/{r['iterations']}"
                           + ("" if r["consistent"] in (True, None) else " ⚠"),
                           lambda r: r["iteration_wins"]))  # fmt: skip
    return cols


def _roofline(r: dict) -> str:
    share = roofline_share(r["roofline"])
    return f"{share} {r['bound']}" if share and r["bound"] else share


def _secondary_columns(summary: pl.DataFrame) -> list[Column]:
    """The columns folded under the table: how the call started, how steady it is, cross-checks."""
    cols = [
        Column("shape", "shape", "the call's shape (q, ctx, heads, …)", lambda r: html.escape(r["shape"]), lambda r: r["shape"]),
        Column("backend", "backend", "", lambda r: html.escape(r["backend"]), lambda r: r["backend"]),
        Column("busy", "busy µs", "GPU busy time inside the span (union of ops)", lambda r: us(r["busy_us"]), lambda r: r["busy_us"]),
        Column("cv", "cv", "coefficient of variation of the span (std / mean)", lambda r: pct(r["cv"]), lambda r: r["cv"]),
    ]  # fmt: skip
    cols += [
        _num("launch_overhead", "launch overhead µs", "first launch call to first GPU op, less the queue wait (median)",
             "launch_overhead_us"),
        _num("queue_wait", "queue wait µs", "the part of first launch call to first GPU op during which the stream was "
             "still busy with earlier work: the CPU ran ahead (median)", "queue_wait_us"),
        _num("idle_before", "stream idle before µs", "the stream idle between its previous op and the call's first op "
             "(median)", "stream_idle_before_us"),
    ]  # fmt: skip
    if "event_us" in summary.columns and summary["event_us"].is_not_null().any():
        cols += [
            Column("events", "CUDA events µs", "median time between the CUDA events recorded around each call "
                   "(runner.json), and how far it is from the median span", _events, lambda r: r["event_us"]),
            Column("event_gap", "events − span µs = lead + tail", "median over calls of event − span; lead: the "
                   "stream idle between the start event and the first op (the flush ended earlier, or the CPU "
                   "launched later); tail: the stop event recorded after the last op ended", _event_parts,
                   lambda r: r["event_minus_span_us"]),
        ]  # fmt: skip
    return cols


def _badge(r: dict) -> str:
    """The shape's verdict beside a backend: a declared winner, a tie within noise, or the same program as another."""
    if r["verdict"] == "winner":
        return ' <span class="best" title="faster than every other backend (95% interval)">fastest</span>'
    if r["verdict"] == "tie":
        return f' <span class="tie">{html.escape(tie_text(r["tie_pct"]))}</span>'
    if r["verdict"] == "same program":
        return f' <span class="tie">same program as {html.escape(r["same_program_as"])}</span>'
    return ""


def numbers_table(summary: pl.DataFrame, colors: dict[str, str], peak_note: str) -> str:
    """*summary* as a sortable HTML table, the fastest backend of each shape marked, and its secondary columns
    as a second table folded under it."""
    more = _table(summary, _secondary_columns(summary), colors, "numbers-more")
    return (
        _table(summary, _columns(summary, peak_note), colors, "numbers")
        + "<details><summary>More columns: launch overhead, queue wait, stream idle before, busy, cv"
        + (", CUDA events" if "event_us" in summary.columns and summary["event_us"].is_not_null().any() else "")
        + f"</summary>{more}</details>"
    )


def _table(summary: pl.DataFrame, cols: list[Column], colors: dict[str, str], table_class: str) -> str:
    head = "".join(
        f'<th data-key="{c.key}" title="{html.escape(c.tip)}" tabindex="0">{html.escape(c.head)}</th>' for c in cols
    )
    rows = []
    for r in summary.iter_rows(named=True):
        cells = []
        for c in cols:
            v = c.value(r)
            sort = "" if v is None else f' data-v="{html.escape(str(v))}"'
            text = c.fmt(r)
            if c.key == "backend":
                swatch = f'<span class="swatch" style="background:{colors.get(r["backend"], "#999")}"></span>'
                text = swatch + text + _badge(r)
            cells.append(f"<td{sort}>{text}</td>")
        win = ' class="win"' if r["winner"] else ""
        rows.append(f"<tr{win}>{''.join(cells)}</tr>")
    return (
        f'<div class="table-wrap"><table class="{table_class} sortable">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def receipt_table(receipt: Receipt) -> str:
    """A round receipt: every (row, attempt) with both arms' µs, the ratio and its interval, verdict and gates."""
    head = ("row", "attempt", "baseline µs", "candidate µs", "ratio", "interval", "verdict", "directional", "SM clock",
            "parity", "sensitivity", "status")  # fmt: skip
    rows = []
    for r in receipt.rows.iter_rows(named=True):
        cells = [
            html.escape(r["row"]), str(r["attempt"]), us(r["baseline_us"], 2), us(r["candidate_us"], 2),
            decimals(r["ratio"], 3), interval(r["low"], r["high"]),
            html.escape(row_verdict(r)),
            _gate(r["directional_gate"], None if r["directional"] is None else decimals(r["directional"], 4)),
            _gate(r["clock_gate"], None if r["clock_fraction"] is None else decimals(r["clock_fraction"], 2)),
            _gate(r["parity_gate"], f"{r['parity']}: {r['parity_value']}"),
            decimals(r["sensitivity"], 3),
            "pass" if r["status"] == "pass" else "<b>refused</b>: " + html.escape(r["refused_by"]),
        ]  # fmt: skip
        cls = ' class="win"' if r["status"] == "pass" else ""
        rows.append(f"<tr{cls}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return (  # the totals line under it is the receipt's own (present.receipt.totals_text)
        '<div class="table-wrap"><table class="numbers">'
        f"<thead><tr>{''.join(f'<th>{html.escape(h)}</th>' for h in head)}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _gate(status: str, value: str | None) -> str:
    text = status if value is None else f"{value} ({status})"
    return html.escape(text)
