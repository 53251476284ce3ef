"""Decision rules as data a serving engine's dispatcher can load (``traceattr compare --json FILE``).

Built from the same frames the terminal and the report show (the summary's
per-shape verdicts and :func:`traceattr.analysis.crossover.crossovers`), so the
three never disagree. The schema (``traceattr.dispatch/1``) is documented in
the README; :func:`backend_for` is the reference reader.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from traceattr.analysis.crossover import with_family
from traceattr.analysis.stats import SAME_WITHIN
from traceattr.analysis.verdicts import best_everywhere
from traceattr.core.jsonable import finite
from traceattr.core.precision import CONFIDENCE
from traceattr.core.shapes import ShapeError, parse_shape
from traceattr.present.formats import rule_text

SCHEMA = "traceattr.dispatch/1"


def _ratio(value: float, lo: float, hi: float) -> dict[str, Any]:
    return {"ratio": finite(value), "ci": [finite(lo), finite(hi)]}


def dispatch_rules(summary: pl.DataFrame, crossings: pl.DataFrame, source: str) -> dict[str, Any]:
    """The ``traceattr.dispatch/1`` document of a sweep (see the README's schema)."""
    fam = with_family(summary)
    families = []
    for family in sorted(fam["family"].unique().to_list()):
        part = fam.filter(pl.col("family") == family).sort("ctx", "median_us")
        points = []
        for (ctx,), at in part.group_by(["ctx"], maintain_order=True):
            tied = at.filter(pl.col("verdict") == "tie")
            winner = at.filter(pl.col("winner"))
            points.append({
                "ctx": ctx,
                "shape": at["shape"][0],
                "fastest": at["backend"][0],  # lowest median
                "winner": winner["backend"][0] if winner.height else None,  # declared (95% interval)
                "tied": tied["backend"].to_list(),
                "tie_pct": finite(tied["tie_pct"][0]) if tied.height else None,
                "median_us": dict(zip(at["backend"], at["median_us"], strict=True)),
            })  # fmt: skip
        cross = crossings.filter(pl.col("family") == family).sort("crossover_ctx")
        rules, ties = [], []
        for r in cross.iter_rows(named=True):
            entry = {
                "ctx": r["crossover_ctx"],
                "below": r["faster_below"],
                "above": r["faster_above"],
                "measured": [r["ctx_low"], r["ctx_high"]],
                "ratio_at_low": _ratio(r["ratio_at_low"], r["ratio_at_low_lo"], r["ratio_at_low_hi"]),
                "ratio_at_high": _ratio(r["ratio_at_high"], r["ratio_at_high_lo"], r["ratio_at_high_hi"]),
                "text": rule_text(r),
            }
            if r["decided"]:
                rules.append(entry)
            else:
                ties.append({**entry, "noise_pct": finite(r["noise_pct"])})
        families.append({
            "family": family,
            "measured_ctx": [p["ctx"] for p in points],
            "dispatch": _segments(rules, part),
            "rules": rules,
            "ties": ties,
            "points": points,
        })  # fmt: skip
    return {
        "schema": SCHEMA,
        "source": source,
        "statistic": "median GPU span per call (first op start to last op end), µs",
        "confidence": CONFIDENCE,
        "same_within": SAME_WITHIN,
        "families": families,
    }


def _segments(rules: list[dict[str, Any]], rows: pl.DataFrame) -> list[dict[str, Any]]:
    """Backend per ctx interval: split at the decided rules; without one, a backend that wins or ties everywhere."""
    if rules:
        bounds = [None, *(r["ctx"] for r in rules), None]
        names = [rules[0]["below"], *(r["above"] for r in rules)]
        return [
            {"ctx_from": a, "ctx_to": b, "backend": n} for a, b, n in zip(bounds[:-1], bounds[1:], names, strict=True)
        ]
    best = best_everywhere(rows)  # None: no rule and no single best backend, nothing a dispatcher should act on
    return [{"ctx_from": None, "ctx_to": None, "backend": best}] if best else []


def backend_for(doc: dict[str, Any], shape: str) -> str | None:
    """The backend a ``traceattr.dispatch/1`` document picks for *shape*, or None (no rule for its family).

    Context lengths outside the family's ``measured_ctx`` extrapolate the outermost segment.
    """
    if doc.get("schema") != SCHEMA:
        raise ValueError(f"not a {SCHEMA} document: schema {doc.get('schema')!r}")
    try:
        s = parse_shape(shape)
    except ShapeError:
        return None
    for fam in doc["families"]:
        if fam["family"] == s.family:
            for seg in fam["dispatch"]:
                if (seg["ctx_from"] is None or s.ctx >= seg["ctx_from"]) and (
                    seg["ctx_to"] is None or s.ctx < seg["ctx_to"]
                ):
                    return seg["backend"]
    return None
