"""Rich tables for the terminal: what an attribution says, at a glance."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import polars as pl
from rich.console import Console
from rich.table import Table
from rich.text import Text

from traceattr.analysis.crossover import rule_text
from traceattr.analysis.verdicts import tie_text
from traceattr.attribution.engine import ROLE_COLUMNS, Attribution
from traceattr.present.console import printable


def _us(ns: int | float | None) -> str:
    return "" if ns is None else f"{ns / 1000:,.1f}"


def _short(name: str | None, width: int) -> str:
    if name is None:
        return ""
    name = printable(name[: width * 4])  # names come from the trace: never let them drive the terminal
    return name if len(name) <= width else name[: width - 1] + "…"


def display_name(name: str | None) -> str:
    """A C++ kernel name without return type, template arguments and parameters.

    ``void flashinfer::mla::BatchMLAPagedAttentionKernel<KernelTraits<…>, …>(T2)``
    becomes ``flashinfer::mla::BatchMLAPagedAttentionKernel<…>``.
    """
    if not name:
        return ""
    name = name.replace("(anonymous namespace)", "{anonymous}")
    out, depth, paren = [], 0, 0
    for ch in name:
        if ch == "<":
            if depth == 0 and paren == 0:
                out.append("<…>")
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            if ch == "(":
                if paren == 0 and out and not "".join(out).rstrip().endswith("operator"):
                    paren += 1
                    continue
                paren += 1
            elif ch == ")":
                paren = max(0, paren - 1)
                continue
            if paren == 0:
                out.append(ch)
    text = "".join(out).strip()
    return text.removeprefix("void ").strip() or name


def _distinct_display_names(names: list[str | None]) -> list[str]:
    """Display names, with a short hash where two full names shorten alike."""
    shorts = [display_name(n) for n in names]
    seen: dict[str, int] = {}
    for s in shorts:
        seen[s] = seen.get(s, 0) + 1
    return [
        f"{s} #{hashlib.sha1((n or '').encode()).hexdigest()[:6]}" if seen[s] > 1 else s
        for s, n in zip(shorts, names, strict=True)
    ]


def render_range_summary(att: Attribution, console: Console, limit: int = 30) -> None:
    """GPU time per range name, as nsys's ``nvtx_sum`` lists CPU time per name: instances, total and
    median GPU span (first op start → last op end), kernel time; the buckets last."""
    per = (
        att.ranges.filter(pl.col("gpu_ops") > 0)
        .group_by("name")
        .agg(
            pl.len().alias("count"),
            pl.col("gpu_span_ns").sum().alias("total"),
            pl.col("gpu_span_ns").median().alias("median"),
            pl.col("gpu_span_ns").min().alias("min"),
            pl.col("gpu_span_ns").max().alias("max"),
            pl.col("kernel_sum_ns").sum().alias("kernels"),
            pl.col("gpu_ops").sum().alias("ops"),
            pl.col("range_id").is_null().all().alias("bucket"),
        )
        .sort("bucket", "total", "name", descending=[False, True, False])
    )
    table = Table(title="GPU time per NVTX range name (µs; span = first op start → last op end)", title_justify="left")
    table.add_column("range", no_wrap=True, max_width=70)
    for head in ("count", "total span", "median span", "min", "max", "kernel sum", "ops"):
        table.add_column(head, justify="right")
    shown = per if limit <= 0 else per.head(limit)
    for row in shown.iter_rows(named=True):
        table.add_row(
            Text(_short(row["name"], 70)), f"{row['count']:,}", _us(row["total"]), _us(row["median"]),
            _us(row["min"]), _us(row["max"]), _us(row["kernels"]), f"{row['ops']:,}",
        )  # fmt: skip
    console.print(table)
    if per.height > shown.height:
        console.print(f"… {per.height - shown.height:,} more range names (--limit 0 shows all)")


def render_attribution(att: Attribution, console: Console, limit: int = 30, ranges: bool = False) -> None:
    """The trace's header, GPU time per range name (or, with *ranges*, per range), and the op names."""
    meta = att.meta
    every = att.ranges
    console.print(
        Text.assemble(
            (printable(str(meta.path)), "bold"),
            f"  nsys {meta.nsys_version or '?'} (schema {meta.schema_version or '?'})  mode {att.mode}  "
            f"{att.trace.gpu_ops.height:,} GPU ops  {every.filter(pl.col('range_id').is_not_null()).height:,} ranges",
        )
    )
    if ranges:
        render_ranges(att, console, limit)
    else:
        render_range_summary(att, console, limit)
    silent = every.filter((pl.col("gpu_ops") == 0) & pl.col("range_id").is_not_null()).height
    if silent:
        console.print(f"{silent:,} ranges launched no GPU work")
    render_kernels(att, console)
    render_notes(att.notes, console)


def render_notes(notes: Iterable[str], console: Console) -> None:
    """One ``note:`` line each (unwrapped, so it greps whole): what the loader or an analysis had to assume."""
    for note in notes:
        console.print(
            Text.assemble(("note:", "yellow"), f" {printable(note)}"), soft_wrap=True
        )  # Text: [..] stays literal


def render_ranges(att: Attribution, console: Console, limit: int = 30) -> None:
    """One row per range with GPU work, in order of its first op (as nsys lists them), buckets last."""
    with_ops = att.ranges.filter(pl.col("gpu_ops") > 0).sort(
        pl.col("range_id").is_null(), "gpu_start_ns", "range_id", nulls_last=True, maintain_order=True
    )
    roles = [c for c in ROLE_COLUMNS if with_ops[c].sum() > 0]
    table = Table(title="GPU time per NVTX range (µs)", title_justify="left", show_lines=False)
    table.add_column("range", no_wrap=True, max_width=56)
    for head in ("lvl", "ops", "span", "busy", "gaps", "launch"):
        table.add_column(head, justify="right")
    for col in roles:
        table.add_column(col.removesuffix("_ns"), justify="right")
    shown = with_ops if limit <= 0 else with_ops.head(limit)
    for row in shown.iter_rows(named=True):
        indent = "  " * (row["level"] or 0)
        table.add_row(
            Text(indent + _short(row["name"], 54 - len(indent))),  # Text: names are not markup
            "" if row["level"] is None else str(row["level"]),
            f"{row['gpu_ops']:,}",
            _us(row["gpu_span_ns"]),
            _us(row["busy_ns"]),
            _us(row["gap_ns"]),
            _us(row["launch_latency_ns"]),
            *[_us(row[c]) for c in roles],
        )
    console.print(table)
    hidden = with_ops.height - shown.height
    if hidden > 0:
        console.print(f"… {hidden:,} more ranges with GPU work (--limit 0 shows all; --out DIR writes them)")


def render_kernels(att: Attribution, console: Console, top: int = 12) -> None:
    ops = att.ops_lazy()
    if att.selected:  # a --domain/--match filter: only the ops of the chosen ranges
        ops = ops.filter(pl.col("range_id").is_not_null())
    per = (
        ops.group_by("name", "role", "family")
        .agg(
            pl.len().alias("n"),
            pl.col("duration_ns").sum().alias("total"),
            pl.col("duration_ns").median().alias("median"),
        )
        .sort("total", descending=True)
        .collect()
    )
    total = per["total"].sum() or 1
    shown = _distinct_display_names(per["name"].to_list())
    table = Table(title="GPU ops by name", title_justify="left")
    for head, justify in (("name", "left"), ("role", "left"), ("family", "left"), ("count", "right"),
                          ("total µs", "right"), ("median µs", "right"), ("share", "right")):  # fmt: skip
        table.add_column(head, justify=justify, no_wrap=True, max_width=70 if head == "name" else None)  # type: ignore[arg-type]
    for label, row in zip(shown[:top], per.head(top).iter_rows(named=True), strict=True):
        table.add_row(
            Text(_short(label, 70)), str(row["role"]), Text(row["family"] or ""), f"{row['n']:,}",
            _us(row["total"]), _us(row["median"]), f"{100 * row['total'] / total:.1f}%",
        )  # fmt: skip
    console.print(table)
    if per.height > top:
        console.print(f"… {per.height - top:,} more op names")


def _bytes(n: int | None) -> str:
    if n is None:
        return ""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def render_plan(plan: Any, console: Console) -> None:
    """What ``traceattr profile`` would do (``--dry-run``), shown anywhere."""
    dev = plan.device
    console.print(
        Text.assemble(
            ("GPU: ", "bold"),
            f"{dev.name} ({dev.arch}, {dev.sm_count} SMs)" if dev else f"none ({plan.device_problem})",
            ("   nsys: ", "bold"),
            str(plan.nsys) if plan.nsys else "not found (set TRACEATTR_NSYS)",
        )
    )
    sizes = Table(title="Shapes", title_justify="left")
    for head in ("shape", "pages", "KV cache", "queries", "must move"):
        sizes.add_column(head, justify="left" if head == "shape" else "right")
    for name, t in plan.tensors.items():
        sizes.add_row(
            Text(name), f"{t['pages']:,}", _bytes(t["kv_bytes"]), _bytes(t["q_bytes"]), _bytes(t["min_bytes_moved"])
        )
    console.print(sizes)
    table = Table(title="Arms", title_justify="left")
    for head in ("shape", "arm", "runs?", "why not / notes"):
        table.add_column(head)
    for a in plan.availability:
        ok = a.reason is None
        table.add_row(a.shape, Text(a.backend), Text("yes", "green") if ok else Text("no", "red"),
                      Text(a.reason or "; ".join(a.notes)))  # fmt: skip
    console.print(table)
    r = plan.run
    order = "A B … B A" if r.order == "abba" else "each arm back to back"
    before = {"flush": f"L2 flush {_bytes(r.flush_bytes)} before every call",
              "none": "nothing between calls (warm L2)"}.get(
        r.between, f"L2 flush {_bytes(r.flush_bytes)} then {r.between.partition('+')[2]}'s call before every call"
    )  # fmt: skip
    console.print(
        f"{r.iters} rounds × {len(plan.runnable)} arms ({order}), {r.warmup} warm-up calls each, "
        f"{before}{', CUDA graphs' if r.graphs else ''}"
        f"{', shuffled pages' if r.shuffle else ''}; validation {'on' if r.validate else 'off'}"
    )
    console.print(Text.assemble(("run folder: ", "bold"), str(plan.folder)))
    console.print(Text.assemble(("command: ", "bold"), " ".join(plan.command())))


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
            title=Text(f"{_short(shape, 120)}: per-call GPU time (µs; median, p10–p90 over calls)"),
            title_justify="left",
        )
        for head in ("backend", "calls", "median", "p10–p90", *[heads[c] for c in parts], "kernels", "roofline",
                     "vs best"):  # fmt: skip
            table.add_column(head, justify="left" if head == "backend" else "right")
        for row in part.sort("median_us").iter_rows(named=True):
            table.add_row(
                Text(_MARKS.get(row.get("verdict") or "", "  ") + _short(row["backend"], 60)), str(row["calls"]), f"{row['median_us']:,.1f}",
                f"{row['p10_us']:,.1f}–{row['p90_us']:,.1f}", *[_us1(row[c]) for c in parts], f"{row['kernels']:.0f}",
                "" if row["roofline"] is None else f"{100 * row['roofline']:.0f}%", f"{row['ratio_to_best']:.2f}×",
            )  # fmt: skip
        table.caption = verdict_caption(part)
        table.caption_justify = "left"
        console.print(table)
        flips = part.filter(pl.col("consistent").not_())
        for row in flips.iter_rows(named=True):
            console.print(
                Text.assemble(
                    ("note:", "yellow"), f" {_short(row['backend'], 60)} vs the winner flips direction across rounds"
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
            _us1(row[c]) for c in ("launch_latency_us", "launch_overhead_us", "queue_wait_us", "stream_idle_before_us")
        ]
        if events:
            ev = row["event_us"]
            cells += [
                "" if ev is None else f"{ev:,.1f} ({100 * row['event_vs_span']:+.0f}%)",
                *[_us1(row[c]) for c in ("event_minus_span_us", "event_lead_us", "event_tail_us")],
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
            + (f"; the rest is within {unexplained:,.1f} µs (medians)." if unexplained is not None else ".")
        )
    console.print(Text(legend, "dim"))


def _us1(v: float | None) -> str:
    return "" if v is None else f"{v:,.1f}"


def render_rules(crossings: pl.DataFrame, console: Console) -> None:
    """Crossovers as decision rules (which backend below and above a context length), and the ties that make none."""
    if crossings.height == 0:
        return
    console.print(Text("Decision rules (where the faster backend changes along ctx, 95% confidence):", "bold"))
    for row in crossings.iter_rows(named=True):
        console.print(Text(printable(f"  {row['family']}: {rule_text(row)}")))


def render_diff(d: pl.DataFrame, console: Console, top: int = 15) -> None:
    """Before → after per level (totals, kernels, roles, range names), the largest changes first."""
    titles = {"total": "Totals", "kernel": "Kernels", "role": "Roles", "range": "NVTX ranges (by name)"}
    for level, title in titles.items():
        part = d.filter(pl.col("level") == level)
        if part.height == 0:
            continue
        shown = part if level in ("total", "role") or top <= 0 else part.head(top)
        more = f" (top {shown.height} of {part.height} by |Δ time|)" if shown.height < part.height else ""
        table = Table(title=f"{title}: before → after{more}", title_justify="left")
        for head in ("name", "count", "Δ count", "time ms", "Δ ms", "Δ %"):
            table.add_column(head, justify="left" if head == "name" else "right")
        for r in shown.iter_rows(named=True):
            pct = "" if r["delta_pct"] is None else f"{100 * r['delta_pct']:+.1f}%"
            table.add_row(
                Text(_short(r["name"], 70)), f"{r['before_n']:,} → {r['after_n']:,}", f"{r['delta_n']:+,}",
                f"{r['before_ms']:,.2f} → {r['after_ms']:,.2f}", f"{r['delta_ms']:+,.2f}", pct,
            )  # fmt: skip
        console.print(table)


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
            f"{r['fixed_us']:,.1f} [{r['fixed_low_us']:,.1f}, {r['fixed_high_us']:,.1f}]",
            f"{r['per_1k_tokens_us']:.3f} [{r['per_1k_low_us']:.3f}, {r['per_1k_high_us']:.3f}]",
            f"{r['r2']:.4f}", half,
        )  # fmt: skip
    console.print(table)
    if (fit["fixed_us"] < 0).any():
        console.print(Text("a negative fixed cost: time is not linear in ctx for that backend (see r²)", "dim"))


def render_reports(reports: pl.DataFrame, console: Console) -> None:
    """One row per report (rank): its GPU work, where it went, or why it failed."""
    ok = reports.filter(pl.col("ok"))
    roles = [c for c in ROLE_COLUMNS if ok.height and (ok[c].sum() or 0) > 0]
    table = Table(title=f"Per report ({ok.height} of {reports.height} read; GPU time in µs, each op once)",
                  title_justify="left")  # fmt: skip
    for head in ("report", "ops", "span", "busy", "sum", *[c.removesuffix("_ns") for c in roles], "s"):
        table.add_column(head, justify="left" if head == "report" else "right", no_wrap=head == "report")
    for row in reports.iter_rows(named=True):
        if not row["ok"]:
            table.add_row(Text(row["report"]), Text("failed (see below)", "red"), *[""] * (4 + len(roles)))
            continue
        table.add_row(
            Text(row["report"]), f"{row['gpu_ops']:,}", _us(row["gpu_span_ns"]), _us(row["busy_ns"]),
            _us(row["gpu_sum_ns"]), *[_us(row[c]) for c in roles], f"{row['seconds']:.2f}",
        )  # fmt: skip
    console.print(table)


def render_across(across: pl.DataFrame, console: Console, key: str, limit: int = 30) -> None:
    """Per range name (or call series) across reports: the ranks' medians, spread, and the slowest rank."""
    stat = next(c for c in across.columns if c.startswith("rank_median_")).removeprefix("rank_median_")
    table = Table(
        title=f"Across reports, per {key} ({stat.removesuffix('_ns')} per row, µs: median over rows per report, then over reports)",
        title_justify="left",
    )
    for head in (key, "reports", "rows", "median", "max", "spread", "slowest"):
        table.add_column(head, justify="left" if head in (key, "slowest") else "right", no_wrap=True,
                         max_width=56 if head == key else None)  # fmt: skip
    shown = across if limit <= 0 else across.head(limit)
    for row in shown.iter_rows(named=True):
        rel = row["spread_rel"]
        table.add_row(
            Text(_short(row[key], 56)), str(row["reports"]), f"{row['rows']:,}", _us(row[f"rank_median_{stat}"]),
            _us(row[f"rank_max_{stat}"]), f"{_us(row[f'spread_{stat}'])} ({100 * rel:.1f}%)" if rel is not None else "",
            Text(row["slowest_report"] or ""),
        )  # fmt: skip
    console.print(table)
    if across.height > shown.height:
        console.print(f"… {across.height - shown.height:,} more (--limit 0 shows all; --out DIR writes them)")


@contextlib.contextmanager
def report_progress(total: int, what: str = "reports") -> Iterator[Callable[[Any], None]]:
    """A progress bar over reports on stderr; yields the callback that advances it by one."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=Console(stderr=True), transient=True,
    ) as bar:  # fmt: skip
        task = bar.add_task(what, total=total)
        yield lambda _result: bar.advance(task)
