"""How numbers read on every surface (terminal, HTML report, markdown): one function per kind of number.

Every formatter writes a missing value (None) as the empty string, so a table cell stays empty
rather than saying ``None``. Units: times arrive in µs (``*_us`` columns) unless the name says
``ns``; a *fraction* is 0.25 for 25 %; a *ratio* is candidate / baseline (1 = as fast).
The sentences for a tie and a crossover live here too: the terminal, the report, the
``--json`` rules and the receipts all word them alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from traceattr.core.shapes import fmt_ctx


def us(value: float | None, digits: int = 1) -> str:
    """Microseconds: ``1,234.5``."""
    return "" if value is None else f"{value:,.{digits}f}"


def us_from_ns(ns: float | None) -> str:
    """Nanoseconds shown as microseconds: ``1,234.5``."""
    return "" if ns is None else us(ns / 1000)


def ms(value: float | None, digits: int = 2) -> str:
    """Milliseconds: ``1,234.56``."""
    return "" if value is None else f"{value:,.{digits}f}"


def signed_ms(value: float | None, digits: int = 2) -> str:
    """A change in milliseconds, its sign always shown: ``+1.25``, ``-0.50``."""
    return "" if value is None else f"{value:+,.{digits}f}"


def count(n: int | None) -> str:
    """A count: ``12,345``."""
    return "" if n is None else f"{n:,}"


def counted(n: int | None, noun: str, plural: str | None = None) -> str:
    """A count and what it counts, singular for one: ``1 shape``, ``12,345 calls``."""
    return "" if n is None else f"{count(n)} {noun if n == 1 else plural or noun + 's'}"


def signed_count(n: int | None) -> str:
    """A change in a count, its sign always shown: ``+3``, ``-1,200``."""
    return "" if n is None else f"{n:+,}"


def pct(fraction: float | None, digits: int = 1) -> str:
    """A fraction as a percentage: 0.256 -> ``25.6%``."""
    return "" if fraction is None else f"{100 * fraction:.{digits}f}%"


def signed_pct(fraction: float | None, digits: int = 1) -> str:
    """A relative change as a percentage, its sign always shown: -0.031 -> ``-3.1%``."""
    return "" if fraction is None else f"{100 * fraction:+.{digits}f}%"


def decimals(value: float | None, digits: int) -> str:
    """A plain number with *digits* decimals and no separators (ratios, r², seconds): ``0.987``."""
    return "" if value is None else f"{value:.{digits}f}"


def times(ratio: float | None, digits: int = 2) -> str:
    """A ratio to the fastest: ``1.23×``."""
    return "" if ratio is None else f"{ratio:.{digits}f}×"


def interval(low: float | None, high: float | None, digits: int = 3) -> str:
    """An interval (of a ratio) in a cell of its own: ``0.987–1.012``; empty when an end is missing; a bound near 1
    with enough digits to show its side (:func:`side_digits`)."""
    if low is None or high is None:
        return ""
    digits = side_digits(low, high, digits)
    return f"{low:.{digits}f}–{high:.{digits}f}"


def with_interval(value: float, low: float, high: float, fmt: Callable[[float], str]) -> str:
    """A value and its 95 % interval, each written by *fmt*: ``12.3 [11.9, 12.8]``."""
    return f"{fmt(value)} [{fmt(low)}, {fmt(high)}]"


def _scaled(n: float, units: tuple[tuple[str, float], ...], digits: int, plain: str) -> str:
    """*n* in the largest of *units* (largest first) it reaches, else *plain*."""
    for unit, scale in units:
        if n >= scale:
            return f"{n / scale:.{digits}f} {unit}"
    return plain


def size(n: int | float | None, digits: int = 2) -> str:
    """Bytes in decimal units: ``1.50 GB``, ``256.00 MB``, ``12 B``."""
    if n is None:
        return ""
    return _scaled(n, (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)), digits, f"{n} B")


def gigabytes(n: float) -> str:
    """A memory size in whole GB: ``141 GB``."""
    return f"{n / 1e9:.0f} GB"


def bandwidth(bytes_per_s: float) -> str:
    """A memory bandwidth: ``4.80 TB/s``."""
    return f"{bytes_per_s / 1e12:.2f} TB/s"


def tie_text(noise_pct: float | None) -> str:
    """How a tie reads everywhere: ``tie within noise (±0.8%)``; *noise_pct* is in percent already."""
    if noise_pct is None or not math.isfinite(noise_pct):
        return "tie (too few calls to tell)"
    return f"tie within noise (±{noise_pct:.1f}%)"


def rule_text(row: Mapping[str, Any]) -> str:
    """One crossing (a row of :func:`traceattr.analysis.crossover.crossovers`) as the sentence every view
    prints, without its family."""
    measured = f"{fmt_ctx(row['ctx_low'])} and {fmt_ctx(row['ctx_high'])}"
    if row["decided"]:
        return (
            f"{row['faster_below']} below ≈{fmt_ctx(row['crossover_ctx'])} ctx, {row['faster_above']} above "
            f"(measured at {measured})"
        )
    return f"{row['faster_below']} vs {row['faster_above']}: {tie_text(row['noise_pct'])} between {measured}, no rule"


def times_with_interval(ratio: float | None, low: float | None, high: float | None, digits: int = 2) -> str:
    """A ratio and its 95 % interval, in one cell or sentence: ``1.07× [1.06–1.08]``; the ratio alone when an end
    is missing."""
    if ratio is None:
        return ""
    if low is None or high is None:
        return times(ratio, digits)
    digits = side_digits(low, high, digits)
    return f"{times(ratio, digits)} [{low:.{digits}f}–{high:.{digits}f}]"


def side_digits(low: float, high: float, digits: int = 2, most: int = 4) -> int:
    """The fewest digits (from *digits*, at most *most*) at which an interval's bounds that are not 1 do not print
    as 1: a bound of 1.004 reads ``1.004``, never a rounded ``1.00`` that seems to touch 1."""
    for d in range(digits, most + 1):
        if all(b == 1 or not math.isfinite(b) or f"{b:.{d}f}" != f"{1:.{d}f}" for b in (low, high)):
            return d
    return most


def win_text(winner: str, ratio: float | None, low: float | None, high: float | None, runner_up: str | None) -> str:
    """How a declared winner reads: ``fa3 wins by 1.07× [1.06–1.08] over flashmla`` (the runner-up's time over the
    winner's, with its interval); ``fa3 (alone)`` with nothing to beat."""
    if runner_up is None or ratio is None:
        return f"{winner} (no other backend)"
    return f"{winner} wins by {times_with_interval(ratio, low, high)} over {runner_up}"


def rule_margins(row: Mapping[str, Any]) -> tuple[str, ...]:
    """How far apart a decided rule's two backends are at its bracket, one sentence per end: ``at 131k fa3 wins by
    1.07× [1.06–1.08]``, ``at 512k flashmla wins by 1.09× [1.08–1.10]`` (the loser's time over the winner's);
    none for a tie."""
    if not row["decided"] or row["ratio_at_low"] is None or row["ratio_at_high"] is None:
        return ()
    # ratio_at_* is t(faster_above) / t(faster_below): above the crossing, the winner's margin is its inverse
    high = 1 / row["ratio_at_high"]
    high_low = 1 / row["ratio_at_high_hi"] if row["ratio_at_high_hi"] else None
    high_high = 1 / row["ratio_at_high_lo"] if row["ratio_at_high_lo"] else None
    low_text = times_with_interval(row["ratio_at_low"], row["ratio_at_low_lo"], row["ratio_at_low_hi"])
    return (
        f"at {fmt_ctx(row['ctx_low'])} {row['faster_below']} wins by {low_text}",
        f"at {fmt_ctx(row['ctx_high'])} {row['faster_above']} wins by {times_with_interval(high, high_low, high_high)}",
    )


def ctx_span(low: int, high: int) -> str:
    """The measured context lengths of a family: ``8k–900k`` (one value when they are equal)."""
    return fmt_ctx(low) if low == high else f"{fmt_ctx(low)}–{fmt_ctx(high)}"


def segment_span(lo: int | None, hi: int | None) -> str:
    """``[lo, hi)`` in exact tokens: ``< 151,390``, ``151,390–151,809``, ``≥ 151,809``, ``all ctx``."""
    if lo is None:
        return "all ctx" if hi is None else f"< {hi:,}"
    return f"≥ {lo:,}" if hi is None else f"{lo:,}–{hi:,}"


def sweep_text(header: Mapping[str, Any], result: Mapping[str, Any] | None) -> str:
    """The answer of a ``traceattr sweep`` (sweep.json's ``result``) as one sentence, family and mode first."""
    # here, not at the top: the formatters load for `traceattr shapes` too, which must not pull polars in
    from traceattr.analysis.sweep_steps import Decision

    mode = "graphs" if header.get("graphs") else "eager"
    below, above = _arm_named(header, "below"), _arm_named(header, "above")
    head = f"{header['family']} ({mode}): "
    if result is None:
        return head + "the sweep did not finish (see its steps)"
    d = Decision.from_json(result)
    if d.swapped:  # the one change runs the other way: each arm stands where the other was named
        below, above = above, below
    kind, bracket, band = d.kind, d.bracket, d.band
    estimate = f" (medians cross at ≈{fmt_ctx(d.estimate)})" if d.estimate else ""
    decided = f"{below} really faster at {fmt_ctx(bracket[0])}, {above} at {fmt_ctx(bracket[1])}" if bracket else ""
    if kind == "crossover" and bracket:
        lo, hi = bracket
        return (head + f"{below} below, {above} above a crossover in {ctx_span(lo, hi)} "
                f"({fmt_ctx((lo + hi) / 2)} ±{pct((hi - lo) / (hi + lo), 0)}){estimate}")  # fmt: skip
    if kind in ("tie band", "undecided band") and band:
        what = "tie within ±1% (same)" if kind == "tie band" else "undecided (neither really faster, nor the same)"
        return head + f"{below} vs {above}: {what} at {ctx_span(*band)}; {decided}{estimate}"
    if kind == "several crossovers":
        spans = [ctx_span(*c) for c in d.crossings]
        return (head + f"the really faster of {below} and {above} changes {len(spans)} times along ctx "
                f"(between {', '.join(spans)}): several crossovers, not one bracket")  # fmt: skip
    if kind == "no crossover":
        lo, hi = header["ctx_range"]
        ends = d.ends if d.ends is not None else ("below", "below")
        if list(ends) == ["below", "below"]:
            return head + f"{above} never really faster than {below} over {ctx_span(lo, hi)}: no crossover"
        words = {"below": f"{below} really faster", "above": f"{above} really faster",
                 "same": "the same (within ±1%)", "ambiguous": "neither really faster (ambiguous)"}  # fmt: skip
        return (head + f"no change of the really faster arm over {ctx_span(lo, hi)}: {words[ends[0]]} at "
                f"{fmt_ctx(lo)}, {words[ends[1]]} at {fmt_ctx(hi)}: no crossover")  # fmt: skip
    refused = None if d.refused is None else (fmt_ctx(d.refused[0]), d.refused[1] if d.refused[1] else "?")
    if kind == "measure":  # a decision, not an answer: what the sweep would do next
        if refused and d.refused and d.refused[0] == d.next_ctx:
            return head + f"not finished: {refused[0]} was refused ({refused[1]}) and is measured again next"
        return head + f"not finished: it would measure {fmt_ctx(d.next_ctx)} next"
    why = {"budget": f"the step budget ran out ({header.get('max_steps')} captures)",
           "resolution": "the bracket cannot be split further",
           "refused": f"{refused[0]} was refused twice by its gates ({refused[1]})"
           if refused else "a point was refused twice by its gates"}[kind]  # fmt: skip
    if bracket:
        lo, hi = bracket
        asked = f", asked ±{pct(d.width, 0)}" if d.width else ""
        where = (
            f"the crossover lies in {ctx_span(lo, hi)} ({fmt_ctx((lo + hi) / 2)} ±{pct((hi - lo) / (hi + lo))}{asked})"
        )
    else:
        where = "no bracket yet"
    pending = ""
    if refused and kind != "refused":
        pending = f"; {refused[0]} was refused ({refused[1]}) and not measured again"
    return head + f"{why}; {where}{estimate}{pending}"


def _arm_named(header: Mapping[str, Any], side: str) -> str:
    """The arm a sweep's header names *side* (``below``/``above``), "?" before step 1 named it."""
    name = header.get(side)
    return "?" if name is None or name == "" else str(name)


def time_fall_text(arm: str, ctx: int, us_at: float, next_ctx: int, us_next: float) -> str:
    """An arm whose time falls as ctx grows: why one bracket may not be the only crossover."""
    return (f"{arm}'s median falls from {us(us_at)} µs at {fmt_ctx(ctx)} to {us(us_next)} µs at {fmt_ctx(next_ctx)}: "
            "its time is not monotone in ctx, so more than one crossover can lie between measured points")  # fmt: skip


def replay_text(now: str) -> str:
    """A record whose stored answer its own points no longer give (written by an earlier traceattr)."""
    return f"this record's answer was written by an earlier traceattr; on its points the sweep now says: {now}"


def signed_percent(percent: float | None, digits: int = 1) -> str:
    """A relative change already in percent (the ``*_pct`` columns of ``diff``), its sign shown: -3.14 -> ``-3.1%``."""
    return "" if percent is None else f"{percent:+.{digits}f}%"


def percent_interval(low: float | None, high: float | None, digits: int = 1) -> str:
    """An interval of a change in percent: ``[-0.4%, +1.2%]``; empty when an end is missing."""
    if low is None or high is None:
        return ""
    return f"[{signed_percent(low, digits)}, {signed_percent(high, digits)}]"


ABOVE_PEAK = "⚑ above peak"


def roofline_share(fraction: float | None, digits: int = 0) -> str:
    """The share of the applying roofline bound: ``54%``; above 100% a flag, not a number (a peak or the shape
    is wrong: no call beats its bound)."""
    if fraction is None:
        return ""
    return ABOVE_PEAK if fraction > 1 else f"{100 * fraction:.{digits}f}%"


def flops(n: float | None) -> str:
    """A FLOP count: ``54.8 GFLOP``."""
    if n is None:
        return ""
    return _scaled(n, (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)), 1, f"{n:.0f} FLOP")
