"""A :class:`~traceattr.analysis.decision.Decision` in words: the sentences every surface prints.

The terminal verdict, the HTML report's decision section, ``compare --json``'s rule texts and the
receipts' views all take their lines from here, so one decision reads the same everywhere. Nothing
here decides: it only words what the record holds.
"""

from __future__ import annotations

from collections.abc import Sequence

from traceattr.analysis.decision import Breakpoint, Decision, FamilyVerdict, ShapeVerdict
from traceattr.core.shapes import fmt_ctx
from traceattr.present.formats import ctx_span, tie_text, times_with_interval, win_text


def shape_line(v: ShapeVerdict) -> str:
    """One shape's answer: the winner by how much over the runner-up, the tie, or why there is none."""
    if v.outcome == "winner":
        m = v.margin
        if v.runner_up is None or m is None:
            return win_text(v.backend, None, None, None, None)
        return win_text(v.backend, m.value, m.low, m.high, v.runner_up)
    if v.outcome == "tie":
        return f"no winner: {tie_text(v.tie_pct)} between {', '.join(v.tied)}"
    return f"no winner: {v.backend} alone"


def _where(ctx_from: int | None, ctx_to: int | None) -> str:
    if ctx_from is None and ctx_to is None:
        return "at every ctx"
    if ctx_from is None:
        return f"below ≈{fmt_ctx(ctx_to)}"  # type: ignore[arg-type]
    if ctx_to is None:
        return f"above ≈{fmt_ctx(ctx_from)}"
    return f"≈{fmt_ctx(ctx_from)}–≈{fmt_ctx(ctx_to)}"


def refused_text(f: FamilyVerdict) -> str:
    """The rows of *f* a round refused, with the gate of each: ``the round refused 131k (directional 0.1 > 0.02)``."""
    return "the round refused " + ", ".join(f"{fmt_ctx(r.ctx)} ({r.why})" for r in f.refused)


def family_line(f: FamilyVerdict) -> str:
    """A family's one line: its dispatch along ctx, and whether each switch is a rule; without its name. Where a
    round refused rows and fewer than two ctx are left, the refusal is why there is no rule (not noise)."""
    if f.refused and len(f.ctx) < 2:
        kept = f"; {f.segments[0].backend} at {fmt_ctx(f.ctx[0])}" if f.ctx and f.segments else ""
        return f"no rule: {refused_text(f)}{kept}"
    span = ctx_span(f.ctx[0], f.ctx[-1])
    if f.outcome == "none":
        return f"no dispatch: no backend was measured at every ctx ({span})"
    if f.outcome == "one backend":
        arm = f.segments[0].backend
        tied = [p.ctx for p in f.points if p.good != {arm}]
        if not tied:
            return f"{arm} at every measured ctx ({span})"
        at = ", ".join(fmt_ctx(c) for c in tied)
        return f"{arm} at every measured ctx ({span}): the fastest, or tied within noise at {at}"
    if len(f.breakpoints) == 1:
        b = f.breakpoints[0]
        head = f"{b.below} below ≈{fmt_ctx(b.ctx)} ctx, {b.above} above"
        return f"{head} ({_bracket(b)})"
    parts = ", ".join(f"{s.backend} {_where(s.ctx_from, s.ctx_to)}" for s in f.segments)
    decided = sum(b.decided for b in f.breakpoints)
    return f"{parts} ({decided} of {len(f.breakpoints)} switches decided)"


def _bracket(b: Breakpoint) -> str:
    measured = f"{fmt_ctx(b.measured[0])} and {fmt_ctx(b.measured[1])}"
    if b.decided:
        return f"measured at {measured}"
    return f"the switch is within noise: {tie_text(b.noise_pct)} between {measured}, no rule"


def breakpoint_lines(b: Breakpoint) -> tuple[str, ...]:
    """What one switch rests on: how far apart its two arms are at its bracket, one line per end (decided), or
    the tie (within noise)."""
    if not b.decided:
        return (f"≈{fmt_ctx(b.ctx)}: {b.below} vs {b.above}: {_bracket(b)}",)
    low, high = b.at_low, b.at_high.inverse()  # at_* is t(above) / t(below): above the switch, its inverse
    return (
        f"at {fmt_ctx(b.measured[0])} {b.below} wins by {times_with_interval(low.value, low.low, low.high)}",
        f"at {fmt_ctx(b.measured[1])} {b.above} wins by {times_with_interval(high.value, high.low, high.high)}",
    )


def family_lines(f: FamilyVerdict) -> list[str]:
    """The family's line, then what each switch rests on (several switches: each named first), then the arms
    left out of the line."""
    lines = [family_line(f)]
    if len(f.breakpoints) == 1 and f.breakpoints[0].decided:
        lines += breakpoint_lines(f.breakpoints[0])
    elif len(f.breakpoints) > 1:
        for b in f.breakpoints:
            lines.append(f"≈{fmt_ctx(b.ctx)}: {b.below} → {b.above} ({_bracket(b)})")
            lines += [f"  {line}" for line in breakpoint_lines(b)] if b.decided else []
    lines += [x.text() for x in f.left_out]
    if f.refused and len(f.ctx) >= 2:
        lines.append(f"{refused_text(f)}: not a point of the line")
    return lines


def verdict_lines(decision: Decision, shapes: Sequence[str] | None = None) -> list[str]:
    """Every line of the verdict: per family measured at two or more ctx its lines (continuations indented
    under the name), then per shape its answer; *shapes* limits the shape lines (default: every shape)."""
    lines: list[str] = [f"note: {decision.provenance.note}"] if decision.provenance.note else []
    for f in decision.families:
        if not f.along_ctx:
            continue  # one ctx: its shape's line says it all
        first, *rest = family_lines(f)
        lines.append(f"{f.family}: {first}")
        lines += [f"{' ' * len(f.family)}  {line}" for line in rest]
    chosen = [v for v in decision.shapes if shapes is None or v.shape in shapes]
    width = max((len(v.shape) for v in chosen), default=0)
    lines += [f"{v.shape.ljust(width)}  {shape_line(v)}" for v in chosen]
    for shape, why in sorted(decision.refused.items()):
        lines.append(f"{shape.ljust(width)}  refused by the round's gates: {why}")
    return lines
