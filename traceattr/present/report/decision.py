"""The report's first screen: the decision a sweep was run for, before any chart or metadata.

Per family of shapes measured at several context lengths, the rule (who is
faster below and above which ctx, with the measured bracket and the ratios at
its two ends, 95 % intervals), or why there is none; then per shape the
fastest backend with its margin over the next one, or the tie, and where the
winner sits on its roofline. Every sentence comes from
:mod:`traceattr.present.formats`, as ``compare`` words it.
"""

from __future__ import annotations

import html

from traceattr.present.formats import interval, roofline_share, times
from traceattr.present.report.data import ReportData
from traceattr.present.verdicts import family_lines, shape_line


def _ratio(value: float | None, low: float | None, high: float | None) -> str:
    """``1.07× [1.06–1.08]``."""
    text = times(value)
    return text + (f" [{interval(low, high, 2)}]" if low is not None and high is not None else "")


def shape_verdicts(d: ReportData) -> list[tuple[str, str, str, str, bool]]:
    """Per compared shape of the decision: (shape, winner or tie, margin, the fastest's roofline, decided)."""
    decision = d.decision
    if decision is None:
        return []
    roofs = {(r["shape"], r["backend"]): r for r in d.table.select("shape", "backend", "roofline", "bound").to_dicts()}
    out = []
    for v in decision.shapes:
        r = roofs.get((v.shape, v.backend))
        roof = roofline_share(r["roofline"]) if r else ""
        roof = f"{roof} of {r['bound']} bound" if roof and r and r["bound"] else roof
        if v.outcome == "winner" and v.runner_up is not None and v.margin is not None:
            m = v.margin
            out.append((v.shape, v.backend, f"next: {v.runner_up} {_ratio(m.value, m.low, m.high)}", roof, True))
        elif v.outcome == "winner":
            out.append((v.shape, v.backend, "no other backend", roof, True))
        else:
            out.append((v.shape, shape_line(v), "", roof, False))
        if v.same_program:
            twins = "; ".join(f"{a} runs {b}'s program" for a, b in v.same_program)
            out[-1] = (*out[-1][:2], "; ".join(x for x in (out[-1][2], twins) if x), *out[-1][3:])
    return out


def has_decision(d: ReportData) -> bool:
    """Whether there is anything to decide: a shape with two or more backends, or a family's rule. A trace that
    is not a sweep (no call names read as backend and shape) has none, and its page opens on its numbers."""
    families = d.decision.families if d.decision is not None else ()
    return bool(shape_verdicts(d)) or any(f.along_ctx for f in families) or bool(d.decision and d.decision.refused)


def decision_html(d: ReportData) -> str:
    """The decision section's body: per family its line and what each switch rests on, then every shape with a
    winner, the undecided ones folded under them (trusted HTML, text escaped). It renders the decision record
    (:mod:`traceattr.analysis.decision`) in the words the terminal prints (:mod:`traceattr.present.verdicts`)."""
    parts = []
    if d.decision is not None and d.decision.provenance.note:  # the time compared holds more than the call
        parts.append(f'<p class="note">{html.escape(d.decision.provenance.note)}</p>')
    rules = []
    for f in d.decision.families if d.decision is not None else ():
        if not f.along_ctx:
            continue
        first, *rest = family_lines(f)
        more = "".join(f"<br>{html.escape(line)}" for line in rest)
        rules.append(f"<li><b>{html.escape(f.family)}</b>: {html.escape(first)}{more}</li>")
    if rules:
        parts.append(f'<ul class="rules">{"".join(rules)}</ul>')
    verdicts = shape_verdicts(d)
    head = (
        '<table class="winners"><thead><tr><th>shape</th><th>{}</th><th>margin: × the fastest</th>'
        "<th>roofline of the fastest</th></tr></thead><tbody>{}</tbody></table>"
    )

    def rows(chosen: list[tuple[str, str, str, str, bool]]) -> str:
        return "".join(
            f"<tr><td>{html.escape(s)}</td><td><b>{html.escape(w)}</b></td><td>{html.escape(m)}</td>"
            f"<td>{html.escape(r)}</td></tr>"
            for s, w, m, r, _ in chosen
        )

    decided = [v for v in verdicts if v[4]]
    undecided = [v for v in verdicts if not v[4]]
    if decided:
        parts.append(head.format("fastest (95%)", rows(decided)))
    refused = sorted(d.decision.refused.items()) if d.decision is not None else []
    if refused:  # a round's: no verdict, the gate that failed (as the terminal's verdict lists them)
        items = "".join(f"<li>{html.escape(s)}: {html.escape(why)}</li>" for s, why in refused)
        parts.append(f"<p>Refused by the round's gates (no verdict):</p><ul>{items}</ul>")
    if undecided:
        table = head.format("answer", rows(undecided))
        parts.append(f"<details><summary>{len(undecided):,} shapes without a winner</summary>{table}</details>")
    if not verdicts and not refused and not d.notes.get("decision"):
        parts.append('<p class="hint">No shape was measured with two or more backends: nothing to decide.</p>')
    return "".join(parts)
