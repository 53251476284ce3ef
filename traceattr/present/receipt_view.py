"""A round's receipt on the terminal: the table a PR gets (row, both arms' medians, the ratio with its interval,
the verdict, the gates), the totals, and why each refused row was refused; then the decision it states.

``traceattr report ROUND --format text`` prints it, and ``compare``/``dispatch`` lead with it on a round folder,
so a terminal never shows a verdict the receipt refused.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from traceattr.analysis.decision import Decision
from traceattr.analysis.rounds import Receipt
from traceattr.phases.compare import RoundPhases
from traceattr.present.columns import Column, dropped_line, fitted_table
from traceattr.present.formats import times_with_interval, us
from traceattr.present.names import printable
from traceattr.present.phases import moved_rows, render_moved, render_round_phases
from traceattr.present.receipt import cause_text, protocol_text, row_verdict, totals_text
from traceattr.present.verdicts import verdict_lines


def render_receipt(receipt: Receipt, console: Console, phases: RoundPhases | None = None) -> None:
    """The receipt's latest attempt per row, its totals and every refusal's cause; with *phases* (stamped
    captures), which phase moved per row."""
    h = receipt.header
    head = f"Round receipt: {h.get('candidate', '?')} vs {h.get('baseline', '?')}"
    console.print(Text(printable(head), "bold"))
    console.print(Text(printable(protocol_text(h)), "dim"))
    # what gives way on a narrow terminal, by value to the reader: the two medians (the ratio with its interval says
    # how they compare), the candidate's first; the row, the ratio, the verdict and the gates stay to the last
    columns = [
        Column("row", "left", wraps=True), Column("baseline µs", drop=1), Column("candidate µs", drop=2),
        Column("candidate / baseline"), Column("verdict", "left"), Column("gates", "left", wraps=True),
    ]  # fmt: skip
    rows = []
    for r in receipt.final.iter_rows(named=True):
        ratio = times_with_interval(r["ratio"], r["low"], r["high"], 3)
        gates = "ok" if r["status"] == "pass" else f"refused: {r['refused_by']}"
        verdict = row_verdict(r)
        rows.append([printable(r["row"]), us(r["baseline_us"], 2), us(r["candidate_us"], 2), ratio, verdict,
                     printable(gates)])  # fmt: skip
    table, dropped = fitted_table(console, columns, rows, "Per row: the latest attempt (95% intervals)")
    console.print(table)
    dropped_line(console, dropped)
    console.print(Text(printable(totals_text(receipt).replace("**", ""))))
    for r in receipt.refused.iter_rows(named=True):
        why = r["cause"] or cause_text(r, h)
        console.print(Text(printable(f"refused {r['row']}: {why}"), "dim"))
    if phases is not None:
        render_moved(moved_rows(phases, receipt), console)


def render_round(receipt: Receipt, decision: Decision, console: Console, phases: RoundPhases | None = None) -> None:
    """The receipt, then the decision it states (per family its line through the passing rows only); with
    *phases*, the per-row phase tables last."""
    render_receipt(receipt, console, phases)
    lines = verdict_lines(decision)
    if lines:
        console.print(Text("Verdict (the receipt's: passing rows only; a refused row has none)", "bold"))
        for line in lines:
            console.print(Text("  " + printable(line)))
    if phases is not None:
        render_round_phases(phases, receipt, console)
