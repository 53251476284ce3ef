"""``compare``'s tables on the terminal: per shape the backends side by side, then the decision rules and the
fixed vs per-token fit."""

from __future__ import annotations

import polars as pl
from rich.console import Console
from rich.table import Table
from rich.text import Text

from traceattr.present.formats import decimals, pct, rule_text, signed_pct, tie_text, times, us, with_interval
from traceattr.present.names import printable, shorten


def _shape_order(name: str) -> tuple[str, int, str]:
    """Shapes of one family together, by context length."""
    from traceattr.core.shapes import ShapeError, parse_shape

    try:
        shape = parse_shape(name)
    except ShapeError:
        return (name, 0, name)
    return (shape.family, shape.ctx, name)


def render_summary(summary: pl.DataFrame, console: Console, unavailable: list[tuple[str, str, str]]) -> None:
    """Per shape: the backends side by side, the winner and where the time goes; then what came before it."""
    exposed = [f"{r}_exposed_us" for r in ("attention", "reduce", "schedule", "flush", "copy", "other")]
    parts = [c for c in (*exposed, "overlap_us") if summary[c].fill_null(0).sum() > 0] + ["gap_us"]
    heads = {"overlap_us": "overlap", "gap_us": "gaps", **{c: c.removesuffix("_exposed_us") for c in exposed}}
    shapes = sorted(summary["shape"].unique().to_list(), key=_shape_order)
    for shape in shapes:
        part = summary.filter(pl.col("shape") == shape)
        table = Table(
            title=Text(f"{shorten(shape, 120)}: per-call GPU time (µs; median, p10–p90 over calls)"),
            title_justify="left",
        )
        for head in ("backend", "calls", "median", "p10–p90", *[heads[c] for c in parts], "kernels", "roofline",
                     "vs best"):  # fmt: skip
            table.add_column(head, justify="left" if head == "backend" else "right")
        for row in part.sort("median_us").iter_rows(named=True):
            table.add_row(
                Text(_MARKS.get(row.get("verdict") or "", "  ") + shorten(row["backend"], 60)), str(row["calls"]), us(row["median_us"]),
                f"{us(row['p10_us'])}–{us(row['p90_us'])}", *[us(row[c]) for c in parts], decimals(row["kernels"], 0),
                pct(row["roofline"], 0), times(row["ratio_to_best"]),
            )  # fmt: skip
        table.caption = verdict_caption(part)
        table.caption_justify = "left"
        console.print(table)
        flips = part.filter(pl.col("consistent").not_())
        for row in flips.iter_rows(named=True):
            console.print(
                Text.assemble(
                    ("note:", "yellow"), f" {shorten(row['backend'], 60)} vs the winner flips direction across rounds"
                )
            )
    if summary["winner"].any():
        console.print(Text("★ winner: faster than every other backend (95% interval of the ratio of medians)", "dim"))
    if summary.height:
        console.print(Text(PARTS_LEGEND, "dim"))
        _render_before(summary, shapes, console)
    for shape, backend, reason in unavailable:
        console.print(Text(printable(f"{shape}: {backend} not run: {reason}"), "dim"))


_MARKS = {"winner": "★ ", "tie": "≈ ", "same program": "= "}


def verdict_caption(part: pl.DataFrame) -> Text | None:
    """What one shape's table concludes, under it: a tie (no winner) and arms that run the same program."""
    lines = []
    tied = part.filter(pl.col("verdict") == "tie").sort("median_us")
    if tied.height:
        lines.append(f"≈ {tie_text(tied['tie_pct'][0])} between {', '.join(tied['backend'])}: no winner")
    for row in part.filter(pl.col("verdict") == "same program").iter_rows(named=True):
        lines.append(f"= {row['backend']} runs the same program as {row['same_program_as']} here: not compared")
    # Text: arm labels such as fa3[graphs] are not markup; printable: names never drive the terminal
    return Text("\n".join(printable(line) for line in lines)) if lines else None


PARTS_LEGEND = (
    "Role columns: exposed time (only that role running); overlap: two or more roles at once; gaps: nothing running. "
    "Per call they add up to the span."
)


def _render_before(summary: pl.DataFrame, shapes: list[str], console: Console) -> None:
    """Launch latency split into overhead and queueing, the stream's idle time, and the CUDA-event cross-check."""
    events = "event_us" in summary.columns and summary["event_us"].is_not_null().any()
    table = Table(title="Before each call's first op (µs, medians over calls)", title_justify="left")
    heads = ["shape", "backend", "launch latency", "launch overhead", "queue wait", "stream idle before"]
    if events:
        heads += ["CUDA events", "events − span", "lead", "tail"]
    for head in heads:
        table.add_column(head, justify="left" if head in ("shape", "backend") else "right", no_wrap=head == "shape")
    order = pl.DataFrame({"shape": shapes}).with_row_index("_o")
    for row in summary.join(order, on="shape").sort("_o", "median_us").iter_rows(named=True):
        cells = [
            us(row[c]) for c in ("launch_latency_us", "launch_overhead_us", "queue_wait_us", "stream_idle_before_us")
        ]
        if events:
            ev = row["event_us"]
            cells += [
                "" if ev is None else f"{us(ev)} ({signed_pct(row['event_vs_span'], 0)})",
                *[us(row[c]) for c in ("event_minus_span_us", "event_lead_us", "event_tail_us")],
            ]
        table.add_row(Text(row["shape"]), Text(row["backend"]), *cells)
    console.print(table)
    legend = (
        "Per call, launch latency (first launch call → first op) = launch overhead + queue wait (the stream still busy "
        "with earlier work after the launch call); stream idle before: from the stream's previous op to the call's first op."
    )
    if events:
        unexplained = summary["event_unexplained_us"].abs().max()
        legend += (
            " CUDA events recorded around each call: events − span = lead (the stream idle between the start event "
            "and the first op) + tail (the stop event recorded after the last op ended)"
            + (f"; the rest is within {us(unexplained)} µs (medians)." if unexplained is not None else ".")
        )
    console.print(Text(legend, "dim"))


def render_rules(crossings: pl.DataFrame, console: Console) -> None:
    """Crossovers as decision rules (which backend below and above a context length), and the ties that make none."""
    if crossings.height == 0:
        return
    console.print(Text("Decision rules (where the faster backend changes along ctx, 95% confidence):", "bold"))
    for row in crossings.iter_rows(named=True):
        console.print(Text(printable(f"  {row['family']}: {rule_text(row)}")))


def render_fit(fit: pl.DataFrame, console: Console) -> None:
    """time = fixed + per-token · ctx per shape family and backend, with the intervals of both."""
    if fit.height == 0:
        return
    table = Table(title="Fixed vs per-token cost: time ≈ fixed + per-1k · ctx/1000 (least squares over calls, 95% CI)",
                  title_justify="left")  # fmt: skip
    for head in ("family", "backend", "contexts", "fixed µs", "per 1k tokens µs", "r²", "fixed = per-token at ctx"):
        table.add_column(head, justify="left" if head in ("family", "backend") else "right")
    for r in fit.sort("family", "per_1k_tokens_us").iter_rows(named=True):
        half = "" if r["ctx_half"] is None else f"{r['ctx_half'] / 1000:,.0f}k"
        table.add_row(
            Text(r["family"]), Text(r["backend"]), str(r["contexts"]),
            with_interval(r["fixed_us"], r["fixed_low_us"], r["fixed_high_us"], us),
            with_interval(r["per_1k_tokens_us"], r["per_1k_low_us"], r["per_1k_high_us"], lambda v: decimals(v, 3)),
            decimals(r["r2"], 4), half,
        )  # fmt: skip
    console.print(table)
    if (fit["fixed_us"] < 0).any():
        console.print(Text("a negative fixed cost: time is not linear in ctx for that backend (see r²)", "dim"))
