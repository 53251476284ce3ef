"""One self-contained HTML report of an attribution: open, keep and send it.

Sections, in order: the decision (per family the rule, per shape the winner:
the first screen answers what the sweep was run for), the numbers table, the
decision along context (when a shape family was measured at several context
lengths), attribution bars, per-call distributions, the timeline of a call's
kernels, inside the kernel (a run folder with in-kernel stamps: :mod:`.figures_phases`),
and last, folded, the run's details (trace, GPU, peaks, run.json,
notes that are not findings). plotly.js is embedded once and the page makes
no network request. Layers: :mod:`.data` computes the frames (pure
polars), :mod:`.figures_compare` / :mod:`.figures_timeline` / :mod:`.table`
draw them, :mod:`.html` assembles the page.

    from traceattr.present.report import write_report
    info = write_report(traceattr.open("run.sqlite").attribute(), Path("report.html"))
"""

from __future__ import annotations

import html as html_text
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from traceattr import __version__
from traceattr.analysis.calls import CallsAgain
from traceattr.analysis.rounds import Receipt
from traceattr.analysis.verdicts import SameProgram, same_label
from traceattr.attribution.engine import Attribution
from traceattr.core.output import write_bytes
from traceattr.core.records import RunRecord
from traceattr.phases.compare import RoundPhases
from traceattr.phases.report import PhaseReport
from traceattr.present.formats import bandwidth, counted, gigabytes
from traceattr.present.phases import row_labels
from traceattr.present.report.data import Limits, ReportData, collect
from traceattr.present.steps import Step, no_step

if TYPE_CHECKING:
    from traceattr.present.report.html import Section

__all__ = ["Limits", "ReportInfo", "build_report", "write_report"]


@dataclass(frozen=True)
class ReportInfo:
    """What :func:`write_report` wrote: the file, its size, its sections and what it sampled or left out."""

    path: Path
    size_bytes: int
    figures: list[str]  # section ids, in page order
    notes: list[str]


@dataclass(frozen=True)
class _Built:
    document: bytes  # html.page's
    sections: list[str]
    notes: list[str]


def build_report(
    att: Attribution,
    *,
    title: str | None = None,
    run: RunRecord | None = None,
    peak_bytes_per_s: float | None = None,
    limits: Limits | None = None,
    receipt: Receipt | None = None,
    group: str | None = None,
    events: list[dict[str, Any]] | None = None,
    same_program: SameProgram = same_label,
    basis: str = "span",
    phases: PhaseReport | None = None,
    round_phases: RoundPhases | None = None,
    step: Step = no_step,
) -> str:
    """The report of *att* as one HTML document (see the module doc); *group*: how call names group
    (:mod:`traceattr.core.callnames`); *events*: a runner.json's CUDA-event times (the cross-check column);
    *same_program*: which arms run one program (the commands pass the backends' declarations); *phases*: a
    stamped run folder's phases (:func:`traceattr.present.phases.load`), *round_phases* a round's."""
    options = _Options(title, run, peak_bytes_per_s, limits, receipt, group, events, same_program, basis,
                       phases, round_phases)  # fmt: skip
    return _build(att, options, step).document.decode()


def write_report(
    att: Attribution,
    path: Path,
    *,
    title: str | None = None,
    run: RunRecord | None = None,
    peak_bytes_per_s: float | None = None,
    limits: Limits | None = None,
    receipt: Receipt | None = None,
    group: str | None = None,
    events: list[dict[str, Any]] | None = None,
    same_program: SameProgram = same_label,
    basis: str = "span",
    phases: PhaseReport | None = None,
    round_phases: RoundPhases | None = None,
    step: Step = no_step,
    calls: pl.DataFrame | None = None,
    again: CallsAgain | None = None,
) -> ReportInfo:
    """Write the report of *att* to *path* atomically (temp file, then rename).

    *run* is a run folder's run.json, *events* a runner.json's CUDA-event times (the cross-check column),
    *calls* the call table where made already (:func:`traceattr.analysis.calls.reduced_calls`), *again* what reads
    its timeline's calls again (:func:`traceattr.analysis.calls.calls_to_read_again`); *step* is told each step of
    the work as it starts (:func:`traceattr.present.steps.steps`).
    """
    options = _Options(title, run, peak_bytes_per_s, limits, receipt, group, events, same_program, basis,
                       phases, round_phases, calls, again)  # fmt: skip
    built = _build(att, options, step)
    step(f"write {Path(path).name}")
    path = write_bytes(Path(path), built.document)
    return ReportInfo(path=path, size_bytes=path.stat().st_size, figures=built.sections, notes=built.notes)


@dataclass(frozen=True)
class _Options:
    """build_report's and write_report's keyword options, in their order."""

    title: str | None
    run: RunRecord | None
    peak_bytes_per_s: float | None
    limits: Limits | None
    receipt: Receipt | None
    group: str | None
    events: list[dict[str, Any]] | None
    same_program: SameProgram
    basis: str = "span"  # what a call's time is (analysis.bases.BASES)
    phases: PhaseReport | None = None  # a stamped run folder's (docs/phases.md)
    round_phases: RoundPhases | None = None  # a round's: its first capture's figures, which phase moved
    calls: pl.DataFrame | None = None  # the call table, where made already
    again: CallsAgain | None = None  # with calls: the timeline's calls read again (analysis.calls.calls_to_read_again)


def _build(att: Attribution, o: _Options, step: Step = no_step) -> _Built:
    step("analyse the calls")
    d = collect(att, o.peak_bytes_per_s, o.limits, group=o.group, events=o.events, same_program=o.same_program,
                basis=o.basis, calls=o.calls, again=o.again)  # fmt: skip
    # plotly (~10 MB) and the figures imported once the analysis' scratch is freed, not held beside it
    from traceattr.present.report.figures_phases import phases_section
    from traceattr.present.report.html import Section, facts_html, notes_html, page, plotly_js, run_html
    from traceattr.present.report.round import round_page, with_round_decision
    from traceattr.present.report.style import backend_colors

    if o.receipt is not None:  # a round's page states the round's decision (its receipt's), not the first capture's
        d = with_round_decision(d, o.receipt, o.title or "")
    step("draw the figures")
    colors = backend_colors(d.table["backend"])
    title = o.title or f"traceattr report: {att.meta.path.name}"
    sections = _sections(d, colors)
    shown = o.phases if o.phases is not None else (o.round_phases.captures[0] if o.round_phases else None)
    if shown is not None:  # inside the kernel, right after the timeline of its calls
        labels = row_labels(o.round_phases, o.receipt) if o.round_phases and o.receipt else None
        sections.append(phases_section(shown, labels))
    general = [*att.notes, *d.notes.get("report", ())]
    notes = [*general, *(n for s in sections for n in s.notes)]
    # metadata and notes that are not findings come last, folded: the first screen is the decision
    details = facts_html(_facts(att, d))
    if o.run is not None and o.run.facts:
        details += run_html(o.run.facts)
    details += notes_html(general)
    summary = f"Trace, GPU, peaks{', run.json' if o.run is not None and o.run.facts else ''}" + (
        f" and {len(general)} note{'s' if len(general) != 1 else ''}" if general else ""
    )
    folded = f"<details><summary>{summary}</summary>{details}</details>"
    if o.receipt is not None:  # a round's page leads with its receipt; the first capture's figures follow
        sections, header = round_page(o.receipt, sections, folded, o.round_phases), ""
    else:
        sections.append(Section("run", "Run details", "What was measured, where, and with which tool.", folded))
        header = f'<p class="subtitle">{html_text.escape(_subtitle(att, d))}</p>'
    return _Built(page(title, header, sections, plotly_js()), [s.id for s in sections], notes)


def _subtitle(att: Attribution, d: ReportData) -> str:
    """One line under the title: the trace, its GPU, what was measured (the rest is in Run details)."""
    gpu = att.trace.devices["name"][0] if att.trace.devices.height and "name" in att.trace.devices.columns else None
    return " · ".join(
        x for x in (att.meta.path.name, gpu, ", ".join(_measured(d))) if x
    )  # fmt: skip


def _measured(d: ReportData) -> list[str]:
    """What the trace measured: ``2 calls``, ``1 backend``, ``1 shape``; series whose names read as no
    backend and shape are counted as such, not as backends and shapes of their own."""
    t = d.totals
    read = [counted(t.backends, "backend"), counted(t.shapes, "shape")] if t.backends or t.shapes else []
    unnamed = [f"{counted(t.unnamed, 'series', 'series')} named without backend and shape"] if t.unnamed else []
    return [counted(t.calls, "call"), *read, *unnamed]


def _facts(att: Attribution, d: ReportData) -> list[tuple[str, str]]:
    meta = att.meta
    gpus = [
        f"{r['name'] or '?'} (device {r['device_id']}, {r['sm_count'] or '?'} SMs"
        + (f", {gigabytes(r['memory_bytes'])}" if r.get("memory_bytes") else "")
        + (f", {bandwidth(r['memory_bandwidth'])}" if r.get("memory_bandwidth") else "")
        + ")"
        for r in att.trace.devices.iter_rows(named=True)
    ]
    selected = ", ".join(
        f"{k} {v!r}" for k, v in (("domain", att.select.domain), ("match", att.select.match)) if v is not None
    )
    peak = (
        f"{bandwidth(d.peak_bytes_per_s)} ({d.peak_source})"
        if d.peak_bytes_per_s
        else f"unknown ({d.peak_source}): no roofline share"
    )
    compute = d.compute_peak.describe() if d.compute_peak else "unknown for this GPU: no roofline share"
    return [
        ("trace", str(meta.path)),
        ("GPU", "; ".join(gpus) or "not recorded"),
        ("Nsight Systems", f"{meta.nsys_version or '?'} (export schema {meta.schema_version or '?'})"),
        ("attribution", f"mode {att.mode}" + (f"; ranges: {selected}" if selected else "")),
        ("measured", " · ".join(_measured(d))),
        ("peak bandwidth", peak),
        ("peak compute", compute),
        ("generated", f"traceattr {__version__}, {time.strftime('%Y-%m-%d %H:%M:%S %z')}"),
    ]


_EVENTS_NOTE = (
    " CUDA events: the time between the events the runner recorded around each call (runner.json), against the "
    "span. They also hold the stream's idle time after the start event was reached and before the first op (lead: "
    "the flush ended, or the CPU launched later) and the time from the last op to a stop event recorded later "
    "(tail): per call, events − span = lead + tail, up to the record calls' own submission time."
)


def _has_events(d: ReportData) -> bool:
    return "event_us" in d.table.columns and d.table["event_us"].is_not_null().any()


def _peak_note(d: ReportData) -> str:
    memory = f"{bandwidth(d.peak_bytes_per_s)} ({d.peak_source})" if d.peak_bytes_per_s else "bandwidth unknown"
    compute = d.compute_peak.describe() if d.compute_peak else "compute peak unknown"
    return f"peaks: {memory}; {compute}"


def _sections(d: ReportData, colors: dict[str, str]) -> list[Section]:
    from traceattr.present.report.decision import decision_html, has_decision
    from traceattr.present.report.figures_compare import attribution_figure, distributions_spec
    from traceattr.present.report.figures_decision import context_figure, context_notes
    from traceattr.present.report.figures_timeline import picker_html, timeline_spec
    from traceattr.present.report.html import Section
    from traceattr.present.report.style import figure_html
    from traceattr.present.report.table import numbers_table

    peak_note = _peak_note(d)
    out = [
        Section(
            "decision",
            "The decision",
            "Per family of shapes measured at several context lengths, its dispatch along ctx: each switch with "
            "its bracket (the measured contexts around it) and the ratios at both ends (95% intervals), and the "
            "arms left out of the line; then per shape the fastest backend with its margin over the next "
            "competitor (95% interval of the ratio of medians) and its roofline share. The same decision "
            "traceattr compare prints and writes with --json.",
            decision_html(d),
            tuple(d.notes.get("decision", ())),
        ),
        Section(
            "numbers",
            "Numbers",
            "Per shape and backend, over every measured call. A call's time is its GPU span, first op start to last "
            "op end. × best: median over the fastest backend's median at that shape. Roofline: the share of the "
            "bound that applies, memory (the bytes the shape must move over the bandwidth) or compute (its FLOPs "
            "over the dense peak for its dtype), whichever takes longer; ⚑ above peak means a peak or the shape is "
            "wrong. Role columns are exposed time, as in Where the time goes. Folded under the table: launch "
            "overhead + queue wait (= first launch call to first op; queue wait: the stream was still busy with "
            "earlier work, the CPU ran ahead), stream idle before the call (from the stream's previous op), busy "
            "time, cv." + (_EVENTS_NOTE if _has_events(d) else "") + " Medians over calls; click a column to sort.",
            numbers_table(d.table, colors, peak_note),
            tuple(d.notes.get("numbers", ())),
        ),
        Section(
            "attribution",
            "Where the time goes",
            "Each call's GPU span cut by what runs at each instant: a role's exposed time (only that role "
            "running), overlap (two or more roles at once, as FlashMLA's combine kernel launched before its split "
            "kernel ends) and gaps (hatched: nothing running), so the parts add up to the span exactly. The bars "
            "are each backend's median call, one group per shape, in µs (the black tick: its span) or as shares of "
            "its span; hover for the part's share of all calls' time. Reduce (orange) is a separate "
            "merge/combine kernel; backends that merge inside the attention kernel (fa3) show none.",
            figure_html(attribution_figure(d.summary), "fig-attribution"),
        ),
        Section(
            "distributions",
            "Per-call times",
            "Every call's span as a point, spread left to right in time order inside its backend's box (Tukey: "
            "quartiles, whiskers at 1.5 IQR, dashed line the mean); each shape has its own scale, so noise and "
            "outliers show.",
            figure_html(distributions_spec(d, colors), "fig-distributions"),
            tuple(d.notes.get("distributions", ())),
        ),
        Section(
            "timeline",
            "Timeline",
            "One call's GPU ops on their device/stream lanes, relative to its first GPU op, coloured by role; the "
            "NVTX lane shows the GPU projection of the call's range and the ranges nested in it. Pick a shape to "
            "see its backends' median calls side by side, or any single call. Hover a bar for the full kernel "
            "name, grid, block and duration.",
            picker_html(d.timeline, "fig-timeline") + figure_html(timeline_spec(d.timeline), "fig-timeline"),
            tuple(d.notes.get("timeline", ())),
        ),
    ]
    if not has_decision(d):  # nothing to decide: no empty section first; what it would have said leads the numbers
        decision, numbers = out[0], out[1]
        out[:2] = [replace(numbers, notes=(*decision.notes, *numbers.notes))]
        return out
    if d.context.height:  # the chart of the decision comes right after the numbers
        out.insert(
            2,
            Section(
                "context",
                "The decision along context",
                "Per family of shapes that differ only in context: each backend's median time as a ratio to the "
                "fastest backend's at that context (log context, log ratio: every backend on the chart, named at its line's end; bars: 95% bootstrap interval of the "
                "ratio, from every call). A rule (green bracket: the two measured contexts around the change, the "
                "dotted line the interpolated crossover) is written only where both sides are really faster; a grey "
                "bracket is a tie within noise, open markers a backend tied with the fastest. Below, per shape, the "
                "parts of each backend's median call (exposed time per role, overlap, gaps), each shape on its own axis. The rules are the ones "
                "traceattr compare prints and writes with --json.",
                figure_html(context_figure(d, colors), "fig-context"),
                tuple(context_notes(d)),
            ),
        )
    return out
