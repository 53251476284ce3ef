"""``compare``'s terminal output: the verdict first (per family its rule, per shape its winner), then per shape the
backends side by side, what came before each call, and the fixed vs per-token fit.

Every table fits its console (:mod:`traceattr.present.columns`): secondary columns go first, and a line says which."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl
from rich.console import Console
from rich.text import Text

from traceattr.analysis.decision import Decision
from traceattr.analysis.summary import in_context_order
from traceattr.present.columns import Column, dropped_line, fitted_table, print_wrapped
from traceattr.present.formats import decimals, roofline_share, signed_pct, tie_text, times, us, with_interval
from traceattr.present.names import printable
from traceattr.present.palette import backend_color
from traceattr.present.verdicts import shape_line, verdict_lines


def render_verdicts(decision: Decision, console: Console, shapes: Sequence[str] | None = None) -> None:
    """The answer before the tables: per shape family its dispatch (each switch with its bracket and margins),
    per shape its winner with the margin over the runner-up and its interval, or the tie
    (:func:`traceattr.present.verdicts.verdict_lines`: the words every surface uses)."""
    lines = verdict_lines(decision, shapes)
    if not lines:
        return
    basis = decision.provenance.basis
    what = "the ratio of medians" if basis == "span" else f"the ratio of medians of each call's {basis} time"
    console.print(Text(f"Verdict (95% intervals of {what}; detail below)", "bold"))
    for line in lines:
        print_wrapped(console, "  " + printable(line), hang=4)  # a narrow terminal: continuations under the line


def shape_verdict(part: pl.DataFrame) -> str:
    """One shape's answer from its summary rows (the decision's wording: :func:`traceattr.present.verdicts.shape_line`)."""
    from traceattr.analysis.decision import decide

    (v,) = decide(part, lambda *_: ()).shapes
    return shape_line(v)


def render_summary(summary: pl.DataFrame, console: Console, unavailable: list[tuple[str, str, str]]) -> None:
    """Per shape: the backends side by side, the winner and where the time goes; then what came before it."""
    exposed = [f"{r}_exposed_us" for r in ("attention", "reduce", "schedule", "flush", "copy", "other")]
    parts = [c for c in (*exposed, "overlap_us") if summary[c].fill_null(0).sum() > 0] + ["gap_us"]
    heads = {"overlap_us": "overlap", "gap_us": "gaps", **{c: c.removesuffix("_exposed_us") for c in exposed}}
    # what goes first when the console is narrow, by value to the reader: kernels and roofline, then the idle and
    # housekeeping parts, then the calls and the spread; reduce and overlap (FlashMLA's combine kernel against fa3's in-kernel
    # merge) and attention stay with the median to the last
    value = {"attention_exposed_us": 1, "reduce_exposed_us": 2, "overlap_us": 3}
    columns = [
        Column("backend", "left"), Column("calls", drop=5), Column("median"), Column("p10–p90", drop=4),
        *[Column(heads[c], drop=value.get(c, 6 + len(parts) - i)) for i, c in enumerate(parts)],
        Column("kernels", drop=len(parts) + 9), Column("roofline", drop=len(parts) + 8), Column("vs best"),
    ]  # fmt: skip
    summary = in_context_order(summary)  # the order summary.csv and the HTML have
    shapes = summary["shape"].unique(maintain_order=True).to_list()
    rows = {
        shape: [
            [
                # the backend in its colour, the one every page draws it in
                Text.assemble(_MARKS.get(row["verdict"], "  "), (printable(row["backend"]), backend_color(row["backend"]))),
                str(row["calls"]),
                us(row["median_us"]), f"{us(row['p10_us'])}–{us(row['p90_us'])}", *[us(row[c]) for c in parts],
                decimals(row["kernels"], 0), roofline_share(row["roofline"]), times(row["ratio_to_best"]),
            ]
            for row in summary.filter(pl.col("shape") == shape).iter_rows(named=True)
        ]
        for shape in shapes
    }  # fmt: skip
    every = [row for part in rows.values() for row in part]  # one set of columns for every shape's table
    dropped: list[str] = []
    for shape in shapes:
        part = summary.filter(pl.col("shape") == shape)
        title = Text(f"{printable(shape)}: per-call GPU time (µs; median, p10–p90 over calls)")
        table, dropped = fitted_table(
            console, columns, rows[shape], title, fit_rows=every, caption=verdict_caption(part)
        )
        console.print(table)
        flips = part.filter(pl.col("consistent").not_())
        for row in flips.iter_rows(named=True):
            console.print(
                Text.assemble(
                    ("note:", "yellow"), f" {printable(row['backend'])} vs the winner flips direction across iterations"
                )
            )
    dropped_line(console, dropped)
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
    columns = [
        Column("shape", "left"), Column("backend", "left"), Column("launch latency"),
        Column("launch overhead", drop=8), Column("queue wait", drop=6), Column("stream idle before", drop=7),
    ]  # fmt: skip
    if events:
        columns += [Column("CUDA events", drop=2), Column("events − span", drop=5), Column("lead", drop=4),
                    Column("tail", drop=3)]  # fmt: skip
    order = pl.DataFrame({"shape": shapes}).with_row_index("_o")
    rows = []
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
        rows.append([printable(row["shape"]), printable(row["backend"]), *cells])
    table, dropped = fitted_table(console, columns, rows, "Before each call's first op (µs, medians over calls)")
    console.print(table)
    dropped_line(console, dropped)
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


def render_fit(fit: pl.DataFrame, console: Console) -> None:
    """time = fixed + per-token · ctx per shape family and backend, with the intervals of both."""
    if fit.height == 0:
        return
    columns = [
        Column("family", "left"), Column("backend", "left"), Column("contexts", drop=2), Column("fixed µs"),
        Column("per 1k tokens µs"), Column("r²", drop=1), Column("fixed = per-token at ctx", drop=3),
    ]  # fmt: skip
    rows = []
    for r in fit.sort("family", "per_1k_tokens_us").iter_rows(named=True):
        half = "" if r["ctx_half"] is None else f"{r['ctx_half'] / 1000:,.0f}k"
        rows.append([
            printable(r["family"]), printable(r["backend"]), str(r["contexts"]),
            with_interval(r["fixed_us"], r["fixed_low_us"], r["fixed_high_us"], us),
            with_interval(r["per_1k_tokens_us"], r["per_1k_low_us"], r["per_1k_high_us"], lambda v: decimals(v, 3)),
            decimals(r["r2"], 4), half,
        ])  # fmt: skip
    title = "Fixed vs per-token cost: time ≈ fixed + per-1k · ctx/1000 (least squares over calls, 95% CI)"
    table, dropped = fitted_table(console, columns, rows, title)
    console.print(table)
    dropped_line(console, dropped)
    if (fit["fixed_us"] < 0).any():
        console.print(Text("a negative fixed cost: time is not linear in ctx for that backend (see r²)", "dim"))
