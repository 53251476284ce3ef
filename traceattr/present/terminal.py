"""Rich tables for the terminal: what an attribution says at a glance (``attribute``), many traces side by
side, ``diff``'s before → after, ``profile --dry-run``'s plan, and the ``note:`` lines every command prints.

``compare``'s per-shape tables live in :mod:`traceattr.present.comparison`, names made fit to show in
:mod:`traceattr.present.names`, number formats in :mod:`traceattr.present.formats`, how a table fits the
terminal in :mod:`traceattr.present.columns`. Notes go to stderr, so stdout holds the answer alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import polars as pl
from rich.console import Console
from rich.text import Text

from traceattr.analysis.calls import call_series, calls
from traceattr.attribution.engine import ROLE_COLUMNS, Attribution
from traceattr.present.columns import LONG_NAME, Column, dropped_line, fitted_table, print_wrapped
from traceattr.present.formats import count, counted, decimals, pct, size, us_from_ns
from traceattr.present.names import distinct_display_names, printable, shorten


def render_range_summary(
    att: Attribution, console: Console, limit: int = 30, grouped: pl.DataFrame | None = None
) -> None:
    """GPU time per call series, as nsys's ``nvtx_sum`` lists CPU time per name: instances, total and
    median GPU span (first op start → last op end), kernel time; the buckets last. A series is a range name
    without its per-instance words (:func:`traceattr.analysis.calls.call_series`: ``iter=``, ``arm=``,
    PyTorch's ``seq =``/``op_id =``, a trailing ``:3``), so the iterations of one call add up in one row; with
    *group* (``--group``) a call's series is its backend and shape as ``compare`` reads them."""
    ranges, series = att.ranges, call_series(pl.col("name"))
    if grouped is not None:  # the calls read as compare reads them (backend + shape); other ranges by their name
        ranges = ranges.join(grouped, on="range_id", how="left")
        series = pl.coalesce("_series", series)
    per = (
        ranges.filter(pl.col("gpu_ops") > 0)
        .group_by(series.alias("name"))
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
        .sort("bucket", "total", "name", descending=[False, True, False], nulls_last=True)
    )
    shown = per if limit <= 0 else per.head(limit)
    columns = [
        Column("call series", "left", wraps=True), Column("count"), Column("total span"), Column("median span"),
        Column("min", drop=3), Column("max", drop=2), Column("kernel sum", drop=1), Column("ops", drop=4),
    ]  # fmt: skip
    rows = [
        [
            shorten(row["name"], LONG_NAME), count(row["count"]), us_from_ns(row["total"]), us_from_ns(row["median"]),
            us_from_ns(row["min"]), us_from_ns(row["max"]), us_from_ns(row["kernels"]), count(row["ops"]),
        ]
        for row in shown.iter_rows(named=True)
    ]  # fmt: skip
    title = "GPU time per call series (µs; span = first op start → last op end; --ranges: every range)"
    table, dropped = fitted_table(console, columns, rows, title)
    console.print(table)
    dropped_line(console, dropped)
    if per.height > shown.height:
        console.print(f"… {per.height - shown.height:,} more call series (--limit 0 shows all)")


def grouped_series(att: Attribution, group: str) -> pl.DataFrame:
    """range_id -> the call series *group* reads it as (``fa3 q8_ctx131k``); a one-line error where it reads none."""
    return calls(att, group).select(pl.col("call_id").alias("range_id"), pl.col("series").alias("_series"))


def render_attribution(
    att: Attribution, console: Console, limit: int = 30, ranges: bool = False, group: str | None = None
) -> None:
    """The trace's header, GPU time per range name (or, with *ranges*, per range), and the op names."""
    meta = att.meta
    every = att.ranges
    # refused, where --group reads no call, before anything is printed
    grouped = grouped_series(att, group) if group is not None and not ranges else None
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
        render_range_summary(att, console, limit, grouped)
    silent = every.filter((pl.col("gpu_ops") == 0) & pl.col("range_id").is_not_null()).height
    if silent:
        console.print(f"{counted(silent, 'range')} launched no GPU work")
    render_kernels(att, console)
    render_notes(att.notes, console)


def render_notes(notes: Iterable[str], console: Console | None = None) -> None:
    """One ``note:`` line each on stderr (unwrapped, so it greps whole): what the loader or an analysis had to
    assume. *console* is the stdout one, whose width is kept; the notes never go there, so stdout holds the
    answer alone, in every command."""
    err = Console(stderr=True, width=console.width if console is not None else None)
    for note in notes:
        err.print(Text.assemble(("note:", "yellow"), f" {printable(note)}"), soft_wrap=True)  # Text: [..] stays literal


def render_ranges(att: Attribution, console: Console, limit: int = 30) -> None:
    """One row per range with GPU work, in order of its first op (as nsys lists them), buckets last."""
    with_ops = att.ranges.filter(pl.col("gpu_ops") > 0).sort(
        pl.col("range_id").is_null(), "gpu_start_ns", "range_id", nulls_last=True, maintain_order=True
    )
    roles = [c for c in ROLE_COLUMNS if with_ops[c].sum() > 0]
    columns = [
        Column("range", "left", wraps=True), Column("lvl", drop=len(roles) + 6), Column("ops", drop=len(roles) + 5),
        Column("span"), Column("busy", drop=len(roles) + 3), Column("gaps", drop=len(roles) + 2),
        Column("launch", drop=len(roles) + 4), *[Column(c.removesuffix("_ns"), drop=len(roles) - i) for i, c in enumerate(roles)],
    ]  # fmt: skip
    shown = with_ops if limit <= 0 else with_ops.head(limit)
    rows = []
    for row in shown.iter_rows(named=True):
        indent = "  " * (row["level"] or 0)
        rows.append([
            Text(indent + shorten(row["name"], LONG_NAME)),  # Text: names are not markup
            "" if row["level"] is None else str(row["level"]), count(row["gpu_ops"]), us_from_ns(row["gpu_span_ns"]),
            us_from_ns(row["busy_ns"]), us_from_ns(row["gap_ns"]), us_from_ns(row["launch_latency_ns"]),
            *[us_from_ns(row[c]) for c in roles],
        ])  # fmt: skip
    table, dropped = fitted_table(console, columns, rows, "GPU time per NVTX range (µs)")
    console.print(table)
    dropped_line(console, dropped)
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
    shown = distinct_display_names(per["name"].to_list())
    columns = [
        Column("name", "left", wraps=True), Column("role", "left", drop=2), Column("family", "left", drop=3),
        Column("count"), Column("total µs"), Column("median µs", drop=1), Column("share"),
    ]  # fmt: skip
    rows = [
        [
            shorten(label, LONG_NAME), str(row["role"]), row["family"] or "", count(row["n"]),
            us_from_ns(row["total"]), us_from_ns(row["median"]), pct(row["total"] / total),
        ]
        for label, row in zip(shown[:top], per.head(top).iter_rows(named=True), strict=True)
    ]  # fmt: skip
    table, dropped = fitted_table(console, columns, rows, "GPU ops by name")
    console.print(table)
    dropped_line(console, dropped)
    if per.height > top:
        console.print(f"… {per.height - top:,} more op names")


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
    sizes = [
        [name, count(t["pages"]), size(t["kv_bytes"]), size(t["q_bytes"]), size(t["min_bytes_moved"])]
        for name, t in plan.tensors.items()
    ]
    columns = [Column("shape", "left", wraps=True), Column("pages", drop=1), Column("KV cache"),
               Column("queries", drop=2), Column("must move")]  # fmt: skip
    table, dropped = fitted_table(console, columns, sizes, "Shapes")
    console.print(table)
    dropped_line(console, dropped)
    arms = [
        [a.shape, a.backend, Text("yes", "green") if a.reason is None else Text("no", "red"),
         a.reason or "; ".join(a.notes)]
        for a in plan.availability
    ]  # fmt: skip
    columns = [Column("shape", "left", wraps=True), Column("arm", "left"), Column("runs?", "left"),
               Column("why not / notes", "left", wraps=True)]  # fmt: skip
    table, dropped = fitted_table(console, columns, arms, "Arms")
    console.print(table)
    dropped_line(console, dropped)
    r = plan.run
    order = "A B … B A" if r.order == "abba" else "each arm back to back"
    before = {"flush": f"L2 flush {size(r.flush_bytes)} before every call",
              "none": "nothing between calls (warm L2)"}.get(
        r.between, f"L2 flush {size(r.flush_bytes)} then {r.between.partition('+')[2]}'s call before every call"
    )  # fmt: skip
    console.print(
        f"{r.iters} iterations × {len(plan.runnable)} arms ({order}), {r.warmup} warm-up calls each, "
        f"{before}{', CUDA graphs' if r.graphs else ''}"
        f"{', shuffled pages' if r.shuffle else ''}; validation {'on' if r.validate else 'off'}"
    )
    print_wrapped(console, f"run folder: {plan.folder}")
    print_wrapped(console, f"command: {' '.join(plan.command())}")


def render_traces(traces: pl.DataFrame, console: Console) -> None:
    """One row per trace (rank): its GPU work, where it went, or why it failed."""
    ok = traces.filter(pl.col("ok"))
    roles = [c for c in ROLE_COLUMNS if ok.height and (ok[c].sum() or 0) > 0]
    columns = [
        Column("trace", "left", wraps=True), Column("ops"), Column("span"), Column("busy", drop=len(roles) + 2),
        Column("sum", drop=len(roles) + 1), *[Column(c.removesuffix("_ns"), drop=len(roles) - i) for i, c in enumerate(roles)],
        Column("seconds", drop=len(roles) + 3),
    ]  # fmt: skip
    rows: list[list[str | Text]] = []
    for row in traces.iter_rows(named=True):
        if not row["ok"]:
            rows.append([row["trace"], Text("failed (see below)", "red"), *[""] * (4 + len(roles))])
            continue
        rows.append([
            row["trace"], count(row["gpu_ops"]), us_from_ns(row["gpu_span_ns"]), us_from_ns(row["busy_ns"]),
            us_from_ns(row["gpu_sum_ns"]), *[us_from_ns(row[c]) for c in roles], decimals(row["seconds"], 2),
        ])  # fmt: skip
    title = f"Per trace ({ok.height} of {traces.height} read; GPU time in µs, each op once)"
    table, dropped = fitted_table(console, columns, rows, title)
    console.print(table)
    dropped_line(console, dropped)


def render_across(across: pl.DataFrame, console: Console, key: str, limit: int = 30) -> None:
    """Per range name (or call series) across traces: the ranks' medians, spread, and the slowest rank."""
    stat = next(c for c in across.columns if c.startswith("rank_median_")).removeprefix("rank_median_")
    title = f"Across traces, per {key} ({stat.removesuffix('_ns')} per row, µs: median over rows per trace, then over traces)"
    columns = [
        Column(key, "left", wraps=True), Column("traces", drop=3), Column("rows", drop=4), Column("median"),
        Column("max"), Column("spread", drop=1), Column("slowest", "left", wraps=True, drop=2),
    ]  # fmt: skip
    shown = across if limit <= 0 else across.head(limit)
    rows = []
    for row in shown.iter_rows(named=True):
        rel = row["spread_rel"]
        rows.append([
            shorten(row[key], LONG_NAME), str(row["traces"]), count(row["rows"]), us_from_ns(row[f"rank_median_{stat}"]),
            us_from_ns(row[f"rank_max_{stat}"]), f"{us_from_ns(row[f'spread_{stat}'])} ({pct(rel)})" if rel is not None else "",
            row["slowest_trace"] or "",
        ])  # fmt: skip
    table, dropped = fitted_table(console, columns, rows, title)
    console.print(table)
    dropped_line(console, dropped)
    if across.height > shown.height:
        console.print(f"… {across.height - shown.height:,} more (--limit 0 shows all; --out DIR writes them)")
