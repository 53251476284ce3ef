"""How a ``traceattr sweep`` search reads: its answer in one sentence, and its steps with their gates."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from traceattr.core.records import SearchRecord
from traceattr.core.shapes import fmt_ctx
from traceattr.present.formats import decimals, interval, pct, us
from traceattr.present.names import printable


def _span(pair: list[int] | None) -> str:
    return "" if not pair else fmt_ctx(pair[0]) if pair[0] == pair[1] else f"{fmt_ctx(pair[0])}–{fmt_ctx(pair[1])}"


def result_text(header: Mapping[str, Any], result: Mapping[str, Any] | None) -> str:
    """The answer of a search (its ``result``) as one sentence, with the family and the mode."""
    mode = "graphs" if header.get("graphs") else "eager"
    below, above = header.get("below") or "?", header.get("above") or "?"
    head = f"{header['family']} ({mode}): "
    if result is None:
        return head + "the search did not finish (see its steps)"
    kind, bracket, band = result["kind"], result.get("bracket"), result.get("band")
    estimate = f" (medians cross at ≈{fmt_ctx(result['estimate'])})" if result.get("estimate") else ""
    decided = f"{below} really faster at {fmt_ctx(bracket[0])}, {above} at {fmt_ctx(bracket[1])}" if bracket else ""
    if kind == "crossover":
        lo, hi = bracket
        return (head + f"{below} below, {above} above a crossover in {_span(bracket)} "
                f"({fmt_ctx((lo + hi) / 2)} ±{pct((hi - lo) / (hi + lo), 0)}){estimate}")  # fmt: skip
    if kind in ("tie band", "undecided band"):
        what = "tie within ±1% (same)" if kind == "tie band" else "undecided (neither really faster, nor the same)"
        return head + f"{below} vs {above}: {what} at {_span(band)}; {decided}{estimate}"
    if kind == "no crossover":
        lo, hi = header["ctx_range"]
        return head + f"{above} never really faster than {below} over {fmt_ctx(lo)}–{fmt_ctx(hi)}: no crossover"
    why = {"budget": "the step budget ran out", "resolution": "the bracket cannot be split further",
           "refused": "a point was refused twice by its gates"}[kind]  # fmt: skip
    return head + f"{why}; " + (f"the crossover lies in {_span(bracket)}{estimate}" if bracket else "no bracket yet")


def render_steps(record: SearchRecord, con: Console) -> None:
    """One row per measured point: its step, ctx, who is faster (ratio above/below and interval), gates."""
    h = record.header
    table = Table(
        title=f"{h['family']}: {h.get('above', '?')} / {h.get('below', '?')} per measured ctx (ratio of medians, 95%)",
        title_justify="left",
    )
    for col in ("step", "ctx", "ratio", "interval", "verdict", "side", "fastest", "µs", "gates", "next", "s"):
        table.add_column(col, justify="right" if col in ("step", "ctx", "ratio", "µs", "s") else "left")
    for s in record.steps:
        for p in s["points"]:
            medians = p.get("medians_us") or {}
            fastest = p.get("fastest")
            d = s["decision"]
            cells = (
                str(s["step"]), fmt_ctx(p["ctx"]), decimals(p.get("ratio"), 3), interval(p.get("low"), p.get("high")),
                p.get("verdict") or "", p["side"], fastest or "", us(medians.get(fastest) if fastest else None),
                "pass" if p["status"] == "pass" else f"refused: {p.get('refused_by', '')}",
                fmt_ctx(d["next_ctx"]) if d.get("next_ctx") else d["kind"], decimals(s.get("seconds"), 0),
            )  # fmt: skip
            table.add_row(*(Text(printable(c)) for c in cells))  # labels are not markup
    con.print(table)
    con.print(escape(result_text(h, record.result)), soft_wrap=True)
