"""A round receipt in words: markdown to paste into a PR (the protocol line, one table row per attempt, the
totals, every refusal with its cause) and the cause of each refused row (:func:`cause_text`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import polars as pl

from traceattr.analysis.causes import drift, predecessor_shift, row_values
from traceattr.analysis.hostbound import HOST_SHARE
from traceattr.analysis.rounds import Receipt
from traceattr.core.fields import section
from traceattr.core.protocol import Gates
from traceattr.core.records import RunnerProtocol, read_runner_protocol
from traceattr.phases.compare import RoundPhases
from traceattr.present.formats import count, decimals, pct, signed_pct, us, with_interval
from traceattr.present.phases import moved_markdown, moved_rows


def row_verdict(r: Mapping[str, Any]) -> str:
    """What the round states of one attempt: its verdict where every gate passed, else none ("—"; the gates
    say why). The one wording of a receipt row's verdict: the markdown, the page and the terminal use it."""
    if r["status"] != "pass":
        return "—"
    return str(r["verdict"]) + (" ⚑" if r["flagged"] else "")


def markdown(receipt: Receipt, phases: RoundPhases | None = None) -> str:
    """A table to paste into a PR: row | baseline µs | candidate µs | ratio | verdict | gates; then the totals;
    with *phases* (stamped captures), which phase moved per row."""
    h = receipt.header
    lines = [
        f"**{_md(h.get('candidate', '?'))} vs {_md(h.get('baseline', '?'))}** · {protocol_text(h)}",
        "",
        "| row | baseline µs | candidate µs | ratio | verdict | gates |",
        "|---|--:|--:|--:|---|---|",
    ]
    rows = receipt.rows
    retried = set(rows.filter(pl.col("attempt") > 1)["row"].to_list())
    target = section(h, "protocol").get("max_noise")
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
        verdict = row_verdict(r)
        gates = "ok" if r["status"] == "pass" else "**refused**: " + _md(r["refused_by"])
        if r["sensitivity"] is not None:
            gates += f" · protocol sensitivity {r['sensitivity']:.3f}"
        if target and r["noise"] is not None and r["noise"] > target:
            gates += f" · median noise ±{r['noise']:.2%} at {max(r['iters_captures'] or [0])} iterations"
        lines.append(
            f"| {label} | {_num(r['baseline_us'], 2)} | {_num(r['candidate_us'], 2)} | {ratio} | {verdict} | {gates} |"
        )
    lines += ["", totals_text(receipt)]
    if any(rows["flagged"].fill_null(False)):
        lines.append("⚑ the verdict is smaller than the protocol sensitivity (back to back vs interleaved)")
    refused = receipt.refused
    if refused.height:
        lines += ["", "Why each refused row was refused (what the captures show):", ""]
        for r in refused.iter_rows(named=True):
            spent = f"{count(r['pairs'])} ABBA iterations over {count(r['captures'])} captures"
            lines.append(f"- **{_md(r['row'])}** ({spent}): {_md(r['cause'] or cause_text(r, h))}")
    if phases is not None:
        lines += moved_markdown(moved_rows(phases, receipt))
    return "\n".join(lines) + "\n"


def totals_text(receipt: Receipt) -> str:
    """``geomean candidate/baseline over passing rows: **0.9060** · **6 / 8 rows pass**`` (markdown)."""
    s = receipt.summary()
    gm = "n/a" if s["geomean"] is None else decimals(s["geomean"], 4)
    spent = receipt.rows["pairs"].fill_null(0).sum()
    return (
        f"geomean candidate/baseline over passing rows: **{gm}** · **{s['passing']} / {s['rows']} rows pass** · "
        f"{count(int(spent))} ABBA iterations spent"
    )


# -- causes ------------------------------------------------------------------------------------


def with_causes(receipt: Receipt) -> Receipt:
    """*receipt* with ``cause`` written for every refused row that has none (from its evidence columns)."""
    rows = receipt.rows
    if not rows.height:
        return receipt
    texts = [
        r["cause"] if r["cause"] or r["status"] == "pass" else cause_text(r, receipt.header)
        for r in rows.iter_rows(named=True)
    ]
    return replace(receipt, rows=rows.with_columns(pl.Series("cause", texts, pl.String)))


def led(header: Mapping[str, Any]) -> bool:
    """Whether the round's groups opened with a lead call (receipts written before leads: no), which turns
    the predecessor split into the position in the group."""
    return bool(section(header, "protocol").get("lead"))


def cause_text(row: Mapping[str, Any], header: Mapping[str, Any]) -> str:
    """Why a refused receipt row was refused, in words with the numbers (analysis.causes found the kinds)."""
    kinds = row.get("causes")
    if kinds is None:
        return "not diagnosed: this receipt was written before traceattr recorded causes"
    gates = section(header, "gates")
    limit = Gates.from_json(gates).directional_limit
    names = {
        "baseline": str(header.get("baseline", "baseline")),
        "candidate": str(header.get("candidate", "candidate")),
    }
    lead = led(header)
    parts = [_CAUSE_WORDS[k](row, names, limit, gates, lead) for k in kinds if k in _CAUSE_WORDS]
    if not parts:
        parts = ["no mechanism shows in the captures (no host-bound calls, no predecessor split, no drift, one "
                 "group of spans): " + _evidence_summary(row, names)]  # fmt: skip
    text = "; ".join(parts)
    if row.get("stopped"):
        text += f" (stopped early: {row['stopped']})"
    return text


def _arms_words(
    row: Mapping[str, Any], names: Mapping[str, str], limit: float, gates: Mapping[str, Any], lead: bool
) -> str:
    note = row.get("arms_note")
    return f"an arm did not run: {note if note else 'no calls'}"


def _parity_words(
    row: Mapping[str, Any], names: Mapping[str, str], limit: float, gates: Mapping[str, Any], lead: bool
) -> str:
    value = row.get("parity_value")
    return f"outputs ({row.get('parity')}): {value if value else 'not checked'}"


def _clock_words(
    row: Mapping[str, Any], names: Mapping[str, str], limit: float, gates: Mapping[str, Any], lead: bool
) -> str:
    fraction = row.get("clock_fraction")
    if fraction is None:
        return "clock: the loaded SM clock was not measured (NVML unavailable in a capture)"
    mhz = row.get("clock_mhz")
    return (
        f"clock: the SM clock ran at {pct(fraction)} of its maximum"
        + (f" ({us(mhz, 0)} MHz)" if mhz is not None else "")
        + f" while the row was timed, below {pct(float(gates.get('min_clock', 0)))}: the GPU was throttled"
    )


def _host_words(
    row: Mapping[str, Any], names: Mapping[str, str], limit: float, gates: Mapping[str, Any], lead: bool
) -> str:
    calls = row_values(row, "calls_captures")
    found = []
    for side in ("baseline", "candidate"):
        counts = row_values(row, f"host_bound_{side}")
        per_round = [
            f"{count(n)} / {count(total)} in capture {i + 1}"
            for i, (n, total) in enumerate(zip(counts, calls, strict=False))
            if total and n / total > HOST_SHARE
        ]
        if per_round:
            found.append(f"{names[side]} {', '.join(per_round)}")
    text = "host-bound: " + (
        "; ".join(found) + " calls waited for their own launches (no queue wait before the call, GPU idle between "
        "its kernels)"
        if found
        else "no host-bound calls, but"
    )
    hold = []
    if row.get("hold_timeouts"):
        hold.append(f"the hold timed out {count(row['hold_timeouts'])} times (the group ran without it)")
    if row.get("hold_gpu_wait_us") is not None:
        hold.append(f"the GPU waited {us(row['hold_gpu_wait_us'])} µs per group for the host to enqueue it")
    if hold:
        text += ("; " if found else " ") + ", ".join(hold)
    return text + "; fix: --graphs, or keep the host-released hold on (--hold)"


def _split(values: Sequence[float]) -> str:
    return with_interval(values[0], values[1], values[2], lambda v: us(v, 2)) + " µs"


# how a predecessor split reads: without a lead call "after itself" is also the first call of a group; behind
# one every timed call followed the other arm, so the split is the position in the group
_SPLIT_WORDS = {
    False: ("predecessor: ", "{other} after the other arm vs {self} after itself",
            " (in ABBA the call after itself is also the first of its group, so this is the position in the group too)"),
    True: ("position in the group: ", "{other} as the second call of its group vs {self} as the first",
           " (a lead call opens each group, so every timed call followed the other arm: what differs is the "
           "position)"),
}  # fmt: skip


def _predecessor_words(row: Mapping[str, Any], names: Mapping[str, str], limit: float,
                       gates: Mapping[str, Any], lead: bool) -> str:  # fmt: skip
    head, each, tail = _SPLIT_WORDS[lead]
    parts = []
    for side in ("baseline", "candidate"):
        self_, other = row.get(f"{side}_after_self"), row.get(f"{side}_after_other")
        if not self_ or not other:
            continue
        mark = "" if predecessor_shift(row, side, limit) is not None else " (within noise)"
        words = each.format(other=_split(other), self=_split(self_))
        parts.append(f"{names[side]} {words} ({signed_pct(other[0] / self_[0] - 1)}{mark})")
    return head + "; ".join(parts) + tail


def _drift_words(
    row: Mapping[str, Any], names: Mapping[str, str], limit: float, gates: Mapping[str, Any], lead: bool
) -> str:
    parts = []
    for side in ("baseline", "candidate"):
        spread = drift(row, side, limit)
        if spread is None:
            continue
        medians = ", ".join(us(v, 2) for v in row_values(row, f"{side}_captures_us"))
        parts.append(f"{names[side]}'s per-capture medians {medians} µs ({pct(spread)} apart)")
    noise = row.get("noise")
    tail = f", each capture's median within ±{pct(noise, 2)}" if noise is not None else ""
    return "drift across captures: " + "; ".join(parts) + tail


def _bimodal_words(
    row: Mapping[str, Any], names: Mapping[str, str], limit: float, gates: Mapping[str, Any], lead: bool
) -> str:
    parts = []
    for side in ("baseline", "candidate"):
        modes = row.get(f"{side}_modes")
        if modes:
            low, high, share = modes
            text = (f"{names[side]}'s calls fall in two groups, {us(low, 2)} µs and {us(high, 2)} µs "
                    f"({pct(share, 0)} in the slower)")  # fmt: skip
            split = sorted(v[0] for v in (row.get(f"{side}_after_self"), row.get(f"{side}_after_other")) if v)
            if len(split) == 2 and all(abs(m / s - 1) < 0.01 for m, s in zip((low, high), split, strict=True)):
                text += (": its first and second calls of each group" if lead
                         else ": the calls after itself and after the other arm")  # fmt: skip
            parts.append(text)
    return "bimodal: " + "; ".join(parts)


_CAUSE_WORDS = {
    "arms": _arms_words, "parity": _parity_words, "clock": _clock_words, "host-bound": _host_words,
    "predecessor": _predecessor_words, "drift": _drift_words, "bimodal": _bimodal_words,
}  # fmt: skip


def _evidence_summary(row: Mapping[str, Any], names: Mapping[str, str]) -> str:
    parts = []
    for side in ("baseline", "candidate"):
        medians = ", ".join(us(v, 2) for v in row_values(row, f"{side}_captures_us"))
        parts.append(f"{names[side]} per-capture medians {medians} µs")
    if row.get("directional") is not None:
        parts.append(f"directional {decimals(row['directional'], 4)}")
    return ", ".join(parts)


def protocol_text(h: Mapping[str, Any]) -> str:
    """The receipt's one-line protocol: sampling, order, what runs between calls, graphs, hold, gates."""
    p, g = section(h, "protocol"), section(h, "gates")
    ran = read_runner_protocol(section(section(h, "runner"), "protocol"), "runner.protocol")  # as it ran
    flush = p.get("flush_bytes")
    kind = ran.flush_kind if ran.flush_kind is not None else p.get("flush_kind")
    flushed = f"{(flush or 0) / 2**20:.0f} MiB L2 flush" + (f", {_FLUSH_WORDS.get(kind, kind)}" if kind else "")
    parts = [
        _sampling(p),
        f"{p.get('order', 'abba').upper()} inside, arm order alternating between captures",
        f"between calls: {p.get('between', '?')}" + (f" ({flushed})" if flush else ""),
        "CUDA graphs" if p.get("graphs") else "eager",
        *_hold_words(p, ran),
        *(["each group opens with an untimed call of its last arm (lead)"] if _led(ran, p) else []),
        f"gates: directional ≤ {g.get('directional_limit')}, loaded SM clock ≥ {g.get('min_clock')}, parity "
        + ("on" if g.get("parity", True) else "off"),
    ]
    return " · ".join(parts)


_FLUSH_WORDS = {"fill+evict": "a fill, then reads that evict", "fill": "a fill (writes only)"}


def _led(ran: RunnerProtocol, p: Mapping[str, Any]) -> bool:
    """Whether the groups opened with a lead call: as the runner says, else as the round's protocol says."""
    return bool(ran.lead if ran.lead is not None else p.get("lead"))


def _hold_words(p: Mapping[str, Any], ran: RunnerProtocol) -> list[str]:
    """The hold as it ran: runner.json's ``hold``, else the plan's ``hold``, else (receipts written while the
    hold was a fixed spin and the runner did not say) the spin's length."""
    hold = ran.hold
    if hold is None and "hold" in p:
        hold = "host" if p["hold"] else "none"
    if hold == "host":
        return ["GPU held before each ABBA group until the host has enqueued it (host-released hold)"]
    if hold is not None or not p.get("hold_us"):
        return ["no hold"] if hold is not None else []
    return [f"GPU held {p['hold_us']:g} µs per call while each group is enqueued (fixed spin)"]


def _sampling(p: Mapping[str, Any]) -> str:
    """``3 captures × 20 iterations``, or with a noise target ``3 captures × 20–500 iterations until …``."""
    captures, iters, noise = p.get("captures", "?"), p.get("iters", "?"), p.get("max_noise")
    if not noise:
        return f"{captures} captures × {iters} iterations"
    return (
        f"{captures} captures × {iters}–{_or_unknown(p.get('max_iters'))} iterations "
        f"(until each arm's median is within ±{noise:.1%}, 95%)"
    )


def _or_unknown(value: Any) -> Any:
    return "?" if value is None else value


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _num(x: float | None, digits: int) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:,.{digits}f}"
