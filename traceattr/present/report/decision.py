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

import polars as pl

from traceattr.core.shapes import fmt_ctx
from traceattr.present.formats import interval, roofline_share, rule_text, tie_text, times
from traceattr.present.report.data import ReportData
from traceattr.present.report.figures_decision import context_notes

MAX_SHAPES = 12  # shapes listed on the first screen; the numbers table has every one


def _inverse(value: float | None) -> float | None:
    return None if value is None or value == 0 else 1 / value


def _ratio(value: float | None, low: float | None, high: float | None) -> str:
    """``1.07× [1.06–1.08]``."""
    text = times(value)
    return text + (f" [{interval(low, high, 2)}]" if low is not None and high is not None else "")


def rule_sentence(row: dict) -> str:
    """A crossing as the rule plus what it rests on: how much slower each side is at the measured bracket."""
    text = rule_text(row)
    if not row["decided"] or row["ratio_at_low"] is None or row["ratio_at_high"] is None:
        return text
    below, above = row["faster_below"], row["faster_above"]
    # ratio_at_* is t(above) / t(below): at the low end above is slower, at the high end below is (inverted)
    low = _ratio(row["ratio_at_low"], row["ratio_at_low_lo"], row["ratio_at_low_hi"])
    high = _ratio(_inverse(row["ratio_at_high"]), _inverse(row["ratio_at_high_hi"]), _inverse(row["ratio_at_high_lo"]))
    return (
        f"{text}: at {fmt_ctx(row['ctx_low'])} {above} takes {low} {below}'s time, "
        f"at {fmt_ctx(row['ctx_high'])} {below} takes {high} {above}'s"
    )


def shape_verdicts(table: pl.DataFrame) -> list[tuple[str, str, str, str]]:
    """Per shape measured with two or more backends: (shape, fastest or tie, margin, the fastest's roofline)."""
    out = []
    for (shape,), part in table.group_by(["shape"], maintain_order=True):
        if part.height < 2:
            continue
        rows = part.sort("ratio_to_best").to_dicts()
        best = rows[0]
        roof = roofline_share(best["roofline"])
        roof = f"{roof} of {best['bound']} bound" if roof and best["bound"] else roof
        tied = [r["backend"] for r in rows if r["verdict"] in ("tie", "same program") or r is best]
        if best["verdict"] == "winner":
            nxt = rows[1]
            margin = f"next: {nxt['backend']} {_ratio(nxt['ratio_to_best'], nxt['vs_best_low'], nxt['vs_best_high'])}"
            out.append((shape, best["backend"], margin, roof))
        elif best["verdict"] == "same program" and len(tied) == part.height:
            out.append((shape, " = ".join(tied), "the same program", roof))
        else:
            out.append((shape, "no winner: " + ", ".join(tied), tie_text(best["tie_pct"]), roof))
    return out


def decision_html(d: ReportData) -> str:
    """The decision section's body: rules, families without one, per-shape winners (trusted HTML, text escaped)."""
    parts = []
    rules = [f"<li><b>{html.escape(r['family'])}</b>: {html.escape(rule_sentence(r))}</li>"
             for r in d.crossovers.iter_rows(named=True)]  # fmt: skip
    rules += [f"<li>{html.escape(n)}</li>" for n in context_notes(d)]
    if rules:
        parts.append(f'<ul class="rules">{"".join(rules)}</ul>')
    verdicts = shape_verdicts(d.table)
    if verdicts:
        rows = "".join(
            f"<tr><td>{html.escape(s)}</td><td><b>{html.escape(w)}</b></td><td>{html.escape(m)}</td>"
            f"<td>{html.escape(r)}</td></tr>"
            for s, w, m, r in verdicts[:MAX_SHAPES]
        )
        more = len(verdicts) - MAX_SHAPES
        foot = f'<p class="hint">{more:,} more shapes in the numbers table.</p>' if more > 0 else ""
        parts.append(
            '<table class="winners"><thead><tr><th>shape</th><th>fastest (95%)</th><th>margin: × the fastest</th>'
            f"<th>roofline of the fastest</th></tr></thead><tbody>{rows}</tbody></table>{foot}"
        )
    elif not d.notes.get("decision"):
        parts.append('<p class="hint">No shape was measured with two or more backends: nothing to decide.</p>')
    return "".join(parts)
