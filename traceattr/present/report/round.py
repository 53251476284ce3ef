"""The page of a round (``traceattr round``, ``traceattr report ROUND_FOLDER``): the receipt leads.

Order: the receipt (verdict table, geomean, "k / n rows pass", every refusal
with its cause), the per-row evidence (per-capture medians, the predecessor
split, host-bound counts, the two groups of a bimodal arm, iterations spent),
then the first capture's figures, each saying that it shows the first capture
only, and the run's metadata folded at the end. The decision section, the
rules the context chart draws and its notes are the round's one decision
(:func:`traceattr.analysis.round_decision.receipt_decision`, what the terminal
prints), not the first capture's: no rule rests on a refused row, and a rule
missing for one names that row and its gate.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import polars as pl

from traceattr.analysis.causes import row_values
from traceattr.analysis.decision import Decision
from traceattr.analysis.hostbound import HOST_SHARE
from traceattr.analysis.round_decision import receipt_decision
from traceattr.analysis.rounds import Receipt
from traceattr.phases.compare import RoundPhases
from traceattr.present.formats import count, pct, us, with_interval
from traceattr.present.phases import moved_rows, row_labels
from traceattr.present.receipt import cause_text, led, protocol_text, totals_text
from traceattr.present.report.data import ReportData, crossings_at
from traceattr.present.report.figures_phases import moved_html, phases_section, round_phases_section
from traceattr.present.report.html import Section, page, plotly_js, run_html
from traceattr.present.report.table import receipt_table

FIRST_CAPTURE = (
    "From here on, the figures show the round's first capture only (one of its captures); the verdicts and the rules "
    "are the receipt's, as in the decision above."
)
DECISION_INTRO = (
    "The round's decision, from its receipt as the terminal prints it: per passing row its verdict, per family of "
    "rows along ctx its dispatch through the passing rows, and each refused row with the gate that refused it (no "
    "verdict, no point of a family's line, so no rule rests on it)."
)


def with_round_decision(d: ReportData, receipt: Receipt, source: str = "") -> ReportData:
    """*d* (the first capture's figures) stating the round's one decision (:func:`receipt_decision`): the decision
    section, the rules the context chart draws and its notes all render the receipt's record, so the page never
    contradicts its receipt and a rule missing for a refused row says so (not noise)."""
    decision = receipt_decision(receipt, source)
    return replace(
        d,
        decision=decision,
        crossovers=crossings_at(decision.crossings_frame(), d.context),
        table=_with_verdicts(d.table, decision),
    )


def _with_verdicts(table: pl.DataFrame, decision: Decision) -> pl.DataFrame:
    """*table* (the first capture's numbers) with the round's verdicts as its badges: the winner and the tie of each
    passing row, none on a refused row; the first capture's own verdicts are not the round's."""
    rows = [
        (v.shape, arm, "winner" if v.outcome == "winner" else "tie", v.tie_pct if v.outcome == "tie" else None)
        for v in decision.shapes
        for arm in ((v.backend,) if v.outcome == "winner" else v.tied)
    ]
    stated = pl.DataFrame(
        rows,
        schema={"shape": pl.String, "backend": pl.String, "verdict": pl.String, "tie_pct": pl.Float64},
        orient="row",
    )
    return (
        table.drop("verdict", "tie_pct")
        .join(stated, on=["shape", "backend"], how="left", maintain_order="left")
        .with_columns((pl.col("verdict") == "winner").fill_null(False).alias("winner"))
        .select(table.columns)
    )


def round_page(
    receipt: Receipt, figures: Sequence[Section], metadata: str, phases: RoundPhases | None = None
) -> list[Section]:
    """The sections of a round's page, in order (see the module doc); *metadata*: trusted HTML, folded; *phases*:
    the round's phases (stamped captures): which phase moved in the receipt, every phase after the evidence. The
    decision section (the receipt's, :func:`with_round_decision`) keeps its title; the others show the first
    capture, the first of them saying so."""
    first: list[Section] = []
    for s in figures:
        if s.id == "decision":
            first.append(replace(s, intro=DECISION_INTRO))
            continue
        said = any(FIRST_CAPTURE in f.notes for f in first)
        notes = (() if said else (FIRST_CAPTURE,)) + s.notes
        first.append(replace(s, title=f"{s.title} (first capture)", notes=notes))
    folded = metadata.replace("<details open>", "<details>")  # the run's facts stay one click away
    return [
        receipt_section(receipt, phases),
        evidence_section(receipt),
        *([round_phases_section(phases, receipt)] if phases is not None else []),
        *first,
        Section("metadata", "Run metadata", "The first capture's facts and run.json, folded.", folded),
    ]


NO_TRACES = (
    "None of the round's captures has its trace.sqlite any more (moved or deleted): this page shows the receipt "
    "and its evidence, which receipt.json holds; the first capture's figures need its trace."
)


def receipt_only_page(receipt: Receipt, title: str, phases: RoundPhases | None = None) -> bytes:
    """The page of a round whose captures' traces are gone: the receipt, its evidence (and its phases, when the
    captures' stamps are left), the header folded."""
    header = run_html(receipt.header).replace("<details open>", "<details>")
    # the phase figures need the stamps and kernels.parquet only, not the trace
    inside = [] if phases is None else [round_phases_section(phases, receipt), first_capture_phases(phases, receipt)]
    gone = NO_TRACES if phases is None else NO_TRACES + " Its phases come from the captures' stamps, which are left."
    sections = [
        replace(receipt_section(receipt, phases), notes=(gone,)),
        evidence_section(receipt),
        *inside,
        Section("metadata", "Round metadata", "The receipt's header (protocol, gates, arms), folded.", header),
    ]
    if not inside:
        return page(title, "", sections, b"")  # no figure: no plotly.js
    return page(title, "", sections, plotly_js())


def first_capture_phases(phases: RoundPhases, receipt: Receipt) -> Section:
    """Inside the kernel of the round's first stamped capture, marked as such."""
    s = phases_section(phases.captures[0], row_labels(phases, receipt))
    return replace(s, title=f"{s.title} ({phases.captures[0].folder.name})")


def receipt_section(receipt: Receipt, phases: RoundPhases | None = None) -> Section:
    h = receipt.header
    refused = receipt.refused
    causes = "".join(
        f"<li><b>{html.escape(r['row'])}</b>: {html.escape(r['cause'] or cause_text(r, h))}</li>"
        for r in refused.iter_rows(named=True)
    )
    totals = html.escape(totals_text(receipt).replace("**", ""))
    body = f'<p class="intro">{html.escape(protocol_text(h))}</p>{receipt_table(receipt)}<p><b>{totals}</b></p>' + (
        f"<h3>Why each refused row was refused</h3><ul>{causes}</ul>" if causes else ""
    )
    if phases is not None:
        body += moved_html(moved_rows(phases, receipt))
    return Section(
        "round",
        f"Round: {h.get('candidate')} vs {h.get('baseline')}",
        "Per row: each arm's median of its per-capture medians (per arm order of the captures, then the geometric "
        "mean of the two orders, so both weigh alike), ratio candidate/baseline with its bootstrap interval "
        "(paired calls), and the verdict (faster/slower: the interval excludes 1; same: within the tolerance; "
        "ambiguous: neither). A row is refused when a gate fails or was not measured: directional disagreement "
        "(baseline-first vs candidate-first ratios), loaded SM clock / max, output parity, host-bound calls (over "
        f"{pct(HOST_SHARE, 0)} of an arm's calls in a capture waited for their launches); below the table, what "
        "the captures show about each refusal. Retried rows keep every attempt; the counts use the latest. ⚑: the "
        "verdict is smaller than the protocol sensitivity.",
        body,
    )


def evidence_section(receipt: Receipt) -> Section:
    h = receipt.header
    names = (str(h.get("baseline", "baseline")), str(h.get("candidate", "candidate")))
    split = ("{0} first / second in group" if led(h) else "{0} after itself / after {1}").format
    head = ("row", "attempt", "iterations per capture", f"{names[0]} per capture µs", f"{names[1]} per capture µs",
            split(names[0], names[1]), split(names[1], names[0]),
            "host-bound calls per capture", "two groups of calls", "stopped early")  # fmt: skip
    rows = []
    for r in receipt.rows.iter_rows(named=True):
        cells = [
            r["row"], str(r["attempt"]), " · ".join(count(n) for n in r["iters_captures"] or []),
            _list_us(r["baseline_captures_us"]), _list_us(r["candidate_captures_us"]),
            _split(r, "baseline"), _split(r, "candidate"), _host(r, names), _modes(r, names), r["stopped"] or "",
        ]  # fmt: skip
        # the intervals, host-bound counts and groups are text that wraps: the table fits 1,400 px, nothing cut
        tds = (f'<td class="text">{html.escape(c)}</td>' if i >= 5 else f"<td>{html.escape(c)}</td>"
               for i, c in enumerate(cells))  # fmt: skip
        rows.append("<tr>" + "".join(tds) + "</tr>")
    # the heads wrap from the third column on, the text cells from the sixth: 1,400 px show every column
    ths = (f'<th class="text">{html.escape(x)}</th>' if i >= 2 else f"<th>{html.escape(x)}</th>"
           for i, x in enumerate(head))  # fmt: skip
    body = (
        '<div class="table-wrap"><table class="numbers">'
        f"<thead><tr>{''.join(ths)}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )
    return Section(
        "evidence",
        "Per-row evidence",
        "What the receipt's numbers and causes come from, over every capture of the round: each arm's median in "
        "each capture (drift shows here); each arm's median with its 95% interval when it followed itself and when "
        "it followed the other arm (in ABBA the call after itself is also the first of its group; with a lead call "
        "opening each group, every call follows the other arm and the split is first vs second); calls that "
        "waited for their own launches (host-bound: no queue wait, GPU idle inside the call); an arm whose calls "
        "fall into two groups; and the rows whose refusal was certain before the last capture. Empty cells: not "
        "recorded (receipts written before traceattr recorded evidence).",
        body,
    )


def _list_us(values: Sequence[float] | None) -> str:
    return ", ".join(us(v, 2) for v in values or [])


def _split(r: dict[str, Any], side: str) -> str:
    self_, other = r.get(f"{side}_after_self"), r.get(f"{side}_after_other")
    if not self_ or not other:
        return ""
    fmt = lambda v: us(v, 2)  # noqa: E731
    return f"{with_interval(*self_, fmt)} / {with_interval(*other, fmt)}"


def _host(r: dict[str, Any], names: tuple[str, str]) -> str:
    calls = r.get("calls_captures")
    if not calls:
        return ""
    parts = [f"{name} {', '.join(count(n) for n in row_values(r, f'host_bound_{side}'))} of {', '.join(count(c) for c in calls)}"
             for name, side in zip(names, ("baseline", "candidate"), strict=True)]  # fmt: skip
    if r.get("hold_gpu_wait_us") is not None:
        parts.append(f"GPU waited {us(r['hold_gpu_wait_us'])} µs per group")
    return "; ".join(parts)


def _modes(r: dict[str, Any], names: tuple[str, str]) -> str:
    parts = []
    for name, side in zip(names, ("baseline", "candidate"), strict=True):
        modes = r.get(f"{side}_modes")
        if modes:
            parts.append(f"{name}: {us(modes[0], 2)} and {us(modes[1], 2)} µs ({pct(modes[2], 0)} slower)")
    return "; ".join(parts)
