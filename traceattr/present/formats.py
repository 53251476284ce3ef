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
    """An interval (of a ratio) in a cell of its own: ``0.987–1.012``; empty when an end is missing."""
    return "" if low is None or high is None else f"{low:.{digits}f}–{high:.{digits}f}"


def with_interval(value: float, low: float, high: float, fmt: Callable[[float], str]) -> str:
    """A value and its 95 % interval, each written by *fmt*: ``12.3 [11.9, 12.8]``."""
    return f"{fmt(value)} [{fmt(low)}, {fmt(high)}]"


def size(n: int | float | None, digits: int = 2) -> str:
    """Bytes in decimal units: ``1.50 GB``, ``256.00 MB``, ``12 B``."""
    if n is None:
        return ""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.{digits}f} {unit}"
    return f"{n} B"


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
    for unit, scale in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} FLOP"
