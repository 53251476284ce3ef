"""Eager against ``--graphs`` as the terminal shows it and as ``traceattr.dispatch-modes/1`` (``dispatch -o``).

Renders a :class:`~traceattr.analysis.mode_compare.ModesComparison` and decides nothing: both tables are each
mode's :class:`~traceattr.analysis.decision.Decision` rendered as ``traceattr.dispatch/2``
(:func:`traceattr.present.dispatch.dispatch_table_doc`) with its ``mode`` stated, so ``parse_table(doc["graphs"])``
loads the graphs table into the dispatcher, and an eager one is refused there unless told.
"""

from __future__ import annotations

import itertools
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from traceattr.analysis.decision import Decision
from traceattr.analysis.dispatch_table import Regret
from traceattr.analysis.mode_compare import FlipRange, ModeComparison, ModesComparison
from traceattr.analysis.segments import ShapePoint, lookup
from traceattr.core.jsonable import finite
from traceattr.present.columns import Column, dropped_line, fitted_table
from traceattr.present.dispatch import dispatch_table_doc, regret_text, segments_text
from traceattr.present.formats import pct, segment_span
from traceattr.present.names import printable

SCHEMA = "traceattr.dispatch-modes/1"
REGRET_IS = "t_graphs(eager table's choice) / t_graphs(fastest) - 1 of the medians at a graphs-measured shape"


def flip_text(r: FlipRange) -> str:
    """One flip range in words: where, which arm each table picks, what is known of its cost under graphs."""
    if r.graphs_measured:
        where = f"graphs measured {', '.join(f'{c:,}' for c in r.graphs_measured)} there"
    else:
        where = "no graphs point inside"
    est = "" if r.interpolated_max is None else f", ≤ +{pct(r.interpolated_max)} interpolated"
    return f"{segment_span(r.ctx_from, r.ctx_to)}: eager {r.eager}, graphs {r.graphs} ({where}{est})"


def _fastest(p: ShapePoint | None) -> str:
    if p is None:
        return ""
    ties = sorted(p.good - {p.fastest})
    return p.fastest if not ties else f"{p.fastest} ~ {', '.join(ties)}"  # "~": within noise of the fastest


def _us(x: float | None) -> str:
    return "" if x is None else f"{x:,.1f}"


def render_modes(cmp: ModesComparison, con: Console) -> None:
    """Per family: both tables side by side along ctx, then per measured ctx what each mode found and what the
    eager table costs under graphs; the flip ranges and the regret in one line each."""
    for c in cmp.families:
        _render_family(c, con)
    for mode, names in (("eager", cmp.only_eager), ("with graphs", cmp.only_graphs)):
        if names:
            con.print(escape(f"measured {mode} only (nothing to compare): {', '.join(names)}"), soft_wrap=True)


def _render_family(c: ModeComparison, con: Console) -> None:
    flipped = {(r.ctx_from, r.ctx_to) for r in c.flip_ranges}
    cuts = sorted({x for s in (*c.eager.segments, *c.graphs.segments) for x in (s.ctx_from, s.ctx_to) if x is not None})
    bounds: list[int | None] = [None, *cuts, None]
    side = []
    for lo, hi in itertools.pairwise(bounds):
        probe = lo if lo is not None else (hi - 1 if hi is not None else 1)
        e, g = _arm(c, "eager", probe), _arm(c, "graphs", probe)
        inside = any((a is None or probe >= a) and (b is None or probe < b) for a, b in flipped)
        side.append([segment_span(lo, hi), e, g, "flips" if inside else ""])
    columns = [
        Column("ctx", "left"),
        Column("eager table", "left"),
        Column("--graphs table", "left"),
        Column("", "left"),
    ]
    table, _ = fitted_table(con, columns, side, Text(printable(f"{c.family}: both tables along ctx")))
    con.print(table)
    e_at = {p.ctx: p for p in c.eager.points}
    g_at = {p.ctx: p for p in c.graphs.points}
    shipped = {s.ctx: s for s in c.shipped}
    rows = []
    for ctx in sorted(set(e_at) | set(g_at)):
        s = shipped.get(ctx)
        g = g_at.get(ctx)
        picked = None if s is None or g is None or s.eager_choice is None else g.median_us.get(s.eager_choice)
        rows.append([
            f"{ctx:,}", _fastest(e_at.get(ctx)), _fastest(g),
            "" if s is None else s.eager_choice or "", _us(picked), _us(None if g is None else g.median_us[g.fastest]),
            "" if s is None or s.regret is None else f"+{pct(s.regret)}",
        ])  # fmt: skip
    columns = [
        Column("ctx"), Column("eager fastest", "left", wraps=True), Column("graphs fastest", "left", wraps=True),
        Column("eager table", "left"), Column("its µs", drop=2), Column("fastest µs", drop=1),
        Column("regret"),
    ]  # fmt: skip
    title = "per measured ctx (µs: graphs medians; ~ ties; regret: the eager table under graphs)"
    table, dropped = fitted_table(con, columns, rows, Text(title))
    con.print(table)
    dropped_line(con, dropped)
    lines = [
        f"eager table: {segments_text(c.eager)}",
        f"graphs table: {segments_text(c.graphs)}",
        "flips at ctx measured in both: "
        + (", ".join(f"{f.ctx:,} (eager {f.eager}, graphs {f.graphs})" for f in c.flips) or "none")
        + f" of {len(c.common_ctx)}",
        "the choice differs in: " + ("; ".join(flip_text(r) for r in c.flip_ranges) or "no ctx"),
        f"the eager table under graphs: regret {_regret_words(c.regret)}; the graphs table's own "
        f"{_regret_words(c.graphs.regret)}",
    ]
    for line in lines:
        con.print(Text(printable(line)), soft_wrap=False)


def _arm(c: ModeComparison, mode: str, ctx: int) -> str:
    return lookup((c.eager if mode == "eager" else c.graphs).segments, ctx) or ""


def _regret_words(r: Regret) -> str:
    text = regret_text(r) or "not measured"
    return text + (f", {r.unmeasured} shapes where its choice was not measured" if r.unmeasured else "")


def modes_doc(eager: Decision, graphs: Decision, cmp: ModesComparison) -> dict[str, Any]:
    """The ``traceattr.dispatch-modes/1`` document (docs/schemas.md): both ``dispatch/2`` tables and the comparison."""
    return {
        "schema": SCHEMA,
        "regret_is": REGRET_IS,
        "eager": {**dispatch_table_doc(eager, cmp.eager), "mode": "eager"},
        "graphs": {**dispatch_table_doc(graphs, cmp.graphs), "mode": "graphs"},
        "families": [_family(c) for c in cmp.families],
        "only_eager": list(cmp.only_eager),
        "only_graphs": list(cmp.only_graphs),
    }


def _regret(r: Regret) -> dict[str, Any]:
    return {"mean": finite(r.mean), "max": finite(r.max), "shapes": r.shapes, "right": r.right,
            "unmeasured": r.unmeasured}  # fmt: skip


def _family(c: ModeComparison) -> dict[str, Any]:
    return {
        "family": c.family,
        "common_ctx": list(c.common_ctx),
        "flips": [
            {
                "ctx": f.ctx,
                "eager": f.eager,
                "graphs": f.graphs,
                "eager_decided": f.eager_decided,
                "graphs_decided": f.graphs_decided,
            }
            for f in c.flips
        ],
        "flip_ranges": [
            {
                "ctx_from": r.ctx_from,
                "ctx_to": r.ctx_to,
                "eager": r.eager,
                "graphs": r.graphs,
                "graphs_measured": list(r.graphs_measured),
                "interpolated_max": finite(r.interpolated_max),
            }
            for r in c.flip_ranges
        ],
        "regret_under_graphs": {
            "eager_table": _regret(c.regret),
            "graphs_table": _regret(c.graphs.regret),
            "per_shape": [
                {
                    "ctx": s.ctx,
                    "shape": s.shape,
                    "eager_choice": s.eager_choice,
                    "graphs_choice": s.graphs_choice,
                    "fastest": s.fastest,
                    "regret": finite(s.regret),
                    "right": s.right,
                }
                for s in c.shipped
            ],
        },
    }
