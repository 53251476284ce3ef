"""Decision rules as data a serving engine's dispatcher can load (``traceattr compare --json FILE``).

Rendered from the one :class:`~traceattr.analysis.decision.Decision` the terminal and the report
show, so they never disagree: the dispatch is the decision's segments. The schema (``traceattr.dispatch/1``) is documented in
the README; :func:`backend_for` is the reference reader.

``traceattr dispatch`` writes ``traceattr.dispatch/2`` (:func:`dispatch_table_doc`): each family of
version 1 plus its key (q, heads, batch, dtype, page), the regret-minimising ``dispatch`` of
:mod:`traceattr.analysis.dispatch_table`, its regret, the "always X" baselines, leave-one-out
predictions and the graph-safe choice. :func:`backend_for` reads both.
"""

from __future__ import annotations

from typing import Any

import polars as pl
from rich.console import Console
from rich.markup import escape

from traceattr.analysis.decision import Breakpoint, Decision, FamilyVerdict, ShapeVerdict, decide, frame_crossings
from traceattr.analysis.dispatch_table import DispatchTable, FamilyTable, Regret, ShapePoint, lookup
from traceattr.core.jsonable import finite
from traceattr.core.shapes import ShapeError, fmt_ctx, parse_shape
from traceattr.present.columns import Column, dropped_line, fitted_table
from traceattr.present.formats import pct, rule_text
from traceattr.present.names import printable

SCHEMA = "traceattr.dispatch/1"
SCHEMA_V2 = "traceattr.dispatch/2"
SCHEMAS = (SCHEMA, SCHEMA_V2)  # what backend_for reads


def _breakpoint(family: str, b: Breakpoint) -> dict[str, Any]:
    row = b.row(family)
    entry = {
        "ctx": b.ctx,
        "below": b.below,
        "above": b.above,
        "measured": list(b.measured),
        "ratio_at_low": b.at_low.to_json(),
        "ratio_at_high": b.at_high.to_json(),
        "text": rule_text(row),
    }
    return entry if b.decided else {**entry, "noise_pct": finite(b.noise_pct)}


def _point(v: ShapeVerdict | None, p: ShapePoint) -> dict[str, Any]:
    medians = dict(v.medians_us) if v is not None else dict(p.median_us)
    return {
        "ctx": p.ctx,
        "shape": p.shape,
        "fastest": v.backend if v is not None else p.fastest,  # the fastest competitor (never a same-program twin)
        "winner": v.backend if v is not None and v.outcome == "winner" else None,  # declared (95% interval)
        "tied": [b for b in v.tied if b != v.backend] if v is not None and v.outcome == "tie" else [],
        "tie_pct": finite(v.tie_pct) if v is not None and v.outcome == "tie" else None,
        "median_us": {b: medians[b] for b in sorted(medians, key=lambda b: (medians[b], b))},
    }


def _family_v1(decision: Decision, f: FamilyVerdict) -> dict[str, Any]:
    return {
        "family": f.family,
        "outcome": f.outcome,
        "measured_ctx": list(f.ctx),
        "dispatch": [
            {
                "ctx_from": s.ctx_from,
                "ctx_to": s.ctx_to,
                "backend": s.backend,
                **({"decided": s.decided} if s.measured is not None else {}),
            }
            for s in f.segments
        ],
        "rules": [_breakpoint(f.family, b) for b in f.rules],
        "ties": [_breakpoint(f.family, b) for b in f.ties],
        "left_out": [x.text() for x in f.left_out],
        "points": [_point(decision.shape(p.shape), p) for p in f.points],
    }


def decision_doc(decision: Decision, source: str | None = None) -> dict[str, Any]:
    """The ``traceattr.dispatch/1`` document of *decision* (README: schema): per family its dispatch (the
    decision's segments), its rules (decided switches) and ties (switches within noise), the arms left out."""
    p = decision.provenance
    return {
        "schema": SCHEMA,
        "source": p.source if source is None else source,
        "statistic": p.statistic,
        "basis": p.basis,
        "confidence": p.confidence,
        "same_within": p.same_within,
        "families": [_family_v1(decision, f) for f in decision.families],
    }


def dispatch_rules(summary: pl.DataFrame, crossings: pl.DataFrame, source: str) -> dict[str, Any]:
    """The ``traceattr.dispatch/1`` document of a summary (with verdicts) and its crossings, decided as
    :func:`traceattr.analysis.decision.decide` decides (the commands pass their decision to :func:`decision_doc`)."""
    return decision_doc(decide(summary, frame_crossings(crossings)), source)


class DispatchDocumentError(ValueError):
    """A dispatch document :func:`backend_for` cannot read: not a ``traceattr.dispatch/1`` or ``/2``
    document, or one edited out of shape (a field of the wrong type, a segment without its backend); the
    message names the field and the value."""


def _doc_field(obj: Any, key: str, kinds: type | tuple[type, ...], where: str, *, nullable: bool = False) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise DispatchDocumentError(f"dispatch document: {where}{key} is missing")
    value = obj[key]
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise DispatchDocumentError(f"dispatch document: {where}{key} holds {value!r:.60}")
    return value


def backend_for(doc: dict[str, Any], shape: str) -> str | None:
    """The backend a ``traceattr.dispatch/1`` or ``/2`` document picks for *shape*, or None (no rule for its family).

    Context lengths outside the family's ``measured_ctx`` extrapolate the outermost segment. The document is
    read as untrusted input: anything out of shape raises :class:`DispatchDocumentError` (a ``ValueError``)
    naming the field, never another exception, and the backend returned is always text.
    """
    if not isinstance(doc, dict) or doc.get("schema") not in SCHEMAS:
        schema = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise DispatchDocumentError(f"not a {' or '.join(SCHEMAS)} document: schema {schema!r:.60}")
    try:
        s = parse_shape(shape)
    except ShapeError:
        return None
    families = _doc_field(doc, "families", list, "")
    for i, fam in enumerate(families):
        at = f"families[{i}]."
        if _doc_field(fam, "family", str, at) != s.family:
            continue
        for j, seg in enumerate(_doc_field(fam, "dispatch", list, at)):
            where = f"{at}dispatch[{j}]."
            low = _doc_field(seg, "ctx_from", int, where, nullable=True)
            high = _doc_field(seg, "ctx_to", int, where, nullable=True)
            backend = _doc_field(seg, "backend", str, where)
            if (low is None or s.ctx >= low) and (high is None or s.ctx < high):
                return str(backend)
    return None


# -- traceattr.dispatch/2 ---------------------------------------------------------------------


def _regret(r: Regret) -> dict[str, Any]:
    return {"mean": finite(r.mean), "max": finite(r.max), "shapes": r.shapes, "right": r.right,
            "unmeasured": r.unmeasured}  # fmt: skip


def _family_v2(v1: dict[str, Any], t: FamilyTable) -> dict[str, Any]:
    gs = t.graph_safe
    return {
        "family": t.family,
        **{k: v for k, v in t.key.items() if v is not None},
        "outcome": v1["outcome"],
        "measured_ctx": v1["measured_ctx"],
        "dispatch": [
            {
                "ctx_from": s.ctx_from,
                "ctx_to": s.ctx_to,
                "backend": s.backend,
                **({"measured": list(s.measured), "decided": s.decided} if s.measured else {}),
            }
            for s in t.segments
        ],
        "regret": {
            "table": _regret(t.regret),
            "always": {b: _regret(r) for b, r in t.baselines.items()},
            "leave_one_out": _regret(t.loo_regret),
            "per_shape": [
                {
                    "ctx": p.ctx,
                    "shape": p.shape,
                    "fastest": p.fastest,
                    "table": _choice(t, p.ctx),
                    "regret": finite(p.regret(_choice(t, p.ctx))),
                    **_held(t, p.ctx),
                }
                for p in t.points
            ],
        },
        "graph_safe": None
        if gs is None
        else {
            "backend": gs.backend,
            "expected_us": finite(gs.expected_us),
            "per_ctx_us": finite(gs.per_ctx_us),
            "expected_regret": finite(gs.expected_regret),
            "max_regret": finite(gs.max_regret),
            "expected_us_by_backend": {b: finite(v) for b, v in gs.expected_us_by_backend.items()},
            "outside_measured": finite(gs.outside_share),
        },
        "rules": v1["rules"],
        "ties": v1["ties"],
        "left_out": v1["left_out"],
        "points": v1["points"],
    }


def _choice(t: FamilyTable, ctx: int) -> str | None:
    return lookup(t.segments, ctx)


def _held(t: FamilyTable, ctx: int) -> dict[str, Any]:
    h = next((h for h in t.loo if h.ctx == ctx), None)
    if h is None:
        return {"loo": None}
    return {"loo": {"predicted": h.predicted, "regret": finite(h.regret), "right": h.right,
                    "extrapolated": h.extrapolated}}  # fmt: skip


def dispatch_table_doc(decision: Decision, table: DispatchTable, source: str | None = None) -> dict[str, Any]:
    """The ``traceattr.dispatch/2`` document (README: "Dispatch tables") of *decision* and its regret *table*
    (:func:`traceattr.analysis.dispatch_table.dispatch_table` of the same decision); families with a single arm
    have nothing to choose and are left out."""
    v1 = decision_doc(decision, source)
    by_name = {f["family"]: f for f in v1["families"]}
    return {
        "schema": SCHEMA_V2,
        "source": v1["source"],
        "statistic": v1["statistic"],
        "basis": v1["basis"],
        "confidence": v1["confidence"],
        "same_within": v1["same_within"],
        "regret_is": "t(choice) / t(fastest) - 1 of the medians at a measured shape",
        "distribution": table.distribution,
        "regret": {"table": _regret(table.regret), "leave_one_out": _regret(table.loo_regret)},
        "families": [_family_v2(by_name[t.family], t) for t in table.families],
    }


def segments_text(t: FamilyTable) -> str:
    """A family's table in words: ``fa3 <163k, flashmla ≥163k (95%)``."""
    parts = []
    for s in t.segments:
        where = f"≥{fmt_ctx(s.ctx_from)}" if s.ctx_to is None and s.ctx_from is not None else (
            f"<{fmt_ctx(s.ctx_to)}" if s.ctx_from is None and s.ctx_to is not None else
            "all ctx" if s.ctx_from is None else f"{fmt_ctx(s.ctx_from)}–{fmt_ctx(s.ctx_to)}")  # fmt: skip
        mark = "" if s.decided is None else (" (95%)" if s.decided else " (within noise)")
        parts.append(f"{s.backend} {where}{mark}")
    return ", ".join(parts)


def regret_text(r: Regret) -> str:
    """Regret as one cell: ``1.1% / 6.4% (5/6)`` (mean / max, right of shapes); empty without a shape."""
    if r.mean is None:
        return ""
    return f"{pct(r.mean)} / {pct(r.max)} ({r.right}/{r.shapes})"


def segments_frame(table: DispatchTable, mode: str | None = None) -> pl.DataFrame:
    """The table's rows for ``dispatch --format csv``: per family and segment the backend, its ctx range
    (``ctx_from`` inclusive, ``ctx_to`` exclusive, empty: open), whether a 95% rule stands at its lower
    breakpoint, and the family's regret (mean, max; shares, not percent); *mode*: eager/graphs where two are shown."""
    rows = [
        {"mode": mode, "family": t.family, "backend": s.backend, "ctx_from": s.ctx_from, "ctx_to": s.ctx_to,
         "decided": s.decided, "regret_mean": finite(t.regret.mean), "regret_max": finite(t.regret.max)}
        for t in table.families
        for s in t.segments
    ]  # fmt: skip
    schema = {"mode": pl.String, "family": pl.String, "backend": pl.String, "ctx_from": pl.Int64, "ctx_to": pl.Int64,
              "decided": pl.Boolean, "regret_mean": pl.Float64, "regret_max": pl.Float64}  # fmt: skip
    frame = pl.DataFrame(rows, schema=schema, orient="row")
    return frame if mode is not None else frame.drop("mode")


def render_table(table: DispatchTable, con: Console) -> None:
    """Per family: the table, its regret (mean / max, right/shapes), leave-one-out, baselines, graph-safe choice."""
    title = "Dispatch table and its regret: t(choice)/t(fastest) − 1, mean / max (right/shapes)"
    columns = [
        Column("family", "left", wraps=True), Column("dispatch", "left", wraps=True), Column("table", "left"),
        Column("leave-one-out", "left", drop=2), Column("always …", "left", wraps=True, drop=3),
        Column("graph-safe (expected regret)", "left", wraps=True, drop=1),
    ]  # fmt: skip
    rows = []
    for t in table.families:
        always = "\n".join(printable(f"{b}: {regret_text(r)}") for b, r in t.baselines.items())  # a line each
        gs = t.graph_safe
        safe = "" if gs is None else f"{gs.backend} (+{pct(gs.expected_regret)}, worst +{pct(gs.max_regret)})"
        cells = (t.family, segments_text(t), regret_text(t.regret), regret_text(t.loo_regret), safe)
        rows.append(
            [*(printable(c) for c in cells[:4]), always, printable(cells[4])]
        )  # Text in the table: arm labels such as fa3[graphs] are not markup
    grid, dropped = fitted_table(con, columns, rows, title)
    con.print(grid)
    dropped_line(con, dropped)
    con.print(escape(f"all shapes: table {regret_text(table.regret)}, leave-one-out {regret_text(table.loo_regret)}; "
                     f"graph-safe over {table.distribution}"))  # fmt: skip
