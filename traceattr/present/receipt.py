"""A round receipt as markdown, to paste into a PR: the protocol line, one table row per attempt, the totals."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import polars as pl

from traceattr.analysis.rounds import Receipt


def markdown(receipt: Receipt) -> str:
    """A table to paste into a PR: row | baseline µs | candidate µs | ratio | verdict | gates; then the totals."""
    h = receipt.header
    lines = [
        f"**{_md(h.get('candidate', '?'))} vs {_md(h.get('baseline', '?'))}** · {protocol_text(h)}",
        "",
        "| row | baseline µs | candidate µs | ratio | verdict | gates |",
        "|---|--:|--:|--:|---|---|",
    ]
    rows = receipt.rows
    retried = set(rows.filter(pl.col("attempt") > 1)["row"].to_list())
    target = (h.get("protocol") or {}).get("max_noise")
    for r in (
        rows.sort("attempt")
        .join(rows.select("row").unique(maintain_order=True).with_row_index("_o"), on="row")
        .sort("_o", "attempt")
        .iter_rows(named=True)
    ):
        label = _md(r["row"]) + (f" (attempt {r['attempt']})" if r["row"] in retried else "")
        ratio = _num(r["ratio"], 3)
        if r["low"] is not None and r["high"] is not None:
            ratio += f" [{r['low']:.3f}, {r['high']:.3f}]"
        verdict = r["verdict"] + (" ⚑" if r["flagged"] else "")
        gates = "ok" if r["status"] == "pass" else "**refused**: " + _md(r["refused_by"])
        if r["sensitivity"] is not None:
            gates += f" · protocol sensitivity {r['sensitivity']:.3f}"
        if target and r["noise"] is not None and r["noise"] > target:
            gates += f" · median noise ±{r['noise']:.2%} at {max(r['iters_rounds'] or [0])} iterations"
        lines.append(
            f"| {label} | {_num(r['baseline_us'], 2)} | {_num(r['candidate_us'], 2)} | {ratio} | {verdict} | {gates} |"
        )
    s = receipt.summary()
    gm = "n/a" if s["geomean"] is None else f"{s['geomean']:.4f}"
    lines += [
        "",
        f"geomean candidate/baseline over passing rows: **{gm}** · **{s['passing']} / {s['rows']} rows pass**",
    ]
    if any(rows["flagged"].fill_null(False)):
        lines.append("⚑ the verdict is smaller than the protocol sensitivity (back to back vs interleaved)")
    return "\n".join(lines) + "\n"


def protocol_text(h: Mapping[str, Any]) -> str:
    """The receipt's one-line protocol: sampling, order, what runs between calls, graphs, hold, gates."""
    p = h.get("protocol") or {}
    g = h.get("gates") or {}
    flush = p.get("flush_bytes")
    parts = [
        _sampling(p),
        f"{p.get('order', 'abba').upper()} inside, arm order alternating between rounds",
        f"between calls: {p.get('between', '?')}" + (f" ({flush / 2**20:.0f} MiB L2 flush)" if flush else ""),
        "CUDA graphs" if p.get("graphs") else "eager",
        *([f"GPU held {p['hold_us']:g} µs per call while each group is enqueued"] if p.get("hold_us") else []),
        f"gates: directional ≤ {g.get('directional_limit')}, loaded SM clock ≥ {g.get('min_clock')}, parity "
        + ("on" if g.get("parity", True) else "off"),
    ]
    return " · ".join(parts)


def _sampling(p: Mapping[str, Any]) -> str:
    """``3 rounds × 20 iterations``, or with a noise target ``3 rounds × 20–500 iterations until …``."""
    rounds, iters, noise = p.get("rounds", "?"), p.get("iters", "?"), p.get("max_noise")
    if not noise:
        return f"{rounds} rounds × {iters} iterations"
    return (
        f"{rounds} rounds × {iters}–{p.get('max_iters') or '?'} iterations "
        f"(until each arm's median is within ±{noise:.1%}, 95%)"
    )


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _num(x: float | None, digits: int) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:,.{digits}f}"
