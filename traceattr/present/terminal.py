"""Rich tables for the terminal: what an attribution says at a glance (``attribute``), many reports side by
side, ``diff``'s before → after, ``profile --dry-run``'s plan, and the ``note:`` lines every command prints.

``compare``'s per-shape tables live in :mod:`traceattr.present.comparison`, names made fit to show in
:mod:`traceattr.present.names`, number formats in :mod:`traceattr.present.formats`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import polars as pl
from rich.console import Console
from rich.table import Table
from rich.text import Text

from traceattr.attribution.engine import ROLE_COLUMNS, Attribution
from traceattr.present.formats import count, decimals, ms, pct, signed_count, signed_ms, signed_pct, size, us_from_ns
from traceattr.present.names import distinct_display_names, printable, shorten


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
            Text(shorten(row["name"], 70)), count(row["count"]), us_from_ns(row["total"]), us_from_ns(row["median"]),
            us_from_ns(row["min"]), us_from_ns(row["max"]), us_from_ns(row["kernels"]), count(row["ops"]),
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
            Text(indent + shorten(row["name"], 54 - len(indent))),  # Text: names are not markup
            "" if row["level"] is None else str(row["level"]),
            count(row["gpu_ops"]),
            us_from_ns(row["gpu_span_ns"]),
            us_from_ns(row["busy_ns"]),
            us_from_ns(row["gap_ns"]),
            us_from_ns(row["launch_latency_ns"]),
            *[us_from_ns(row[c]) for c in roles],
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
    shown = distinct_display_names(per["name"].to_list())
    table = Table(title="GPU ops by name", title_justify="left")
    for head, justify in (("name", "left"), ("role", "left"), ("family", "left"), ("count", "right"),
                          ("total µs", "right"), ("median µs", "right"), ("share", "right")):  # fmt: skip
        table.add_column(head, justify=justify, no_wrap=True, max_width=70 if head == "name" else None)  # type: ignore[arg-type]
    for label, row in zip(shown[:top], per.head(top).iter_rows(named=True), strict=True):
        table.add_row(
            Text(shorten(label, 70)), str(row["role"]), Text(row["family"] or ""), count(row["n"]),
            us_from_ns(row["total"]), us_from_ns(row["median"]), pct(row["total"] / total),
        )  # fmt: skip
    console.print(table)
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
    sizes = Table(title="Shapes", title_justify="left")
    for head in ("shape", "pages", "KV cache", "queries", "must move"):
        sizes.add_column(head, justify="left" if head == "shape" else "right")
    for name, t in plan.tensors.items():
        sizes.add_row(
            Text(name), count(t["pages"]), size(t["kv_bytes"]), size(t["q_bytes"]), size(t["min_bytes_moved"])
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
    before = {"flush": f"L2 flush {size(r.flush_bytes)} before every call",
              "none": "nothing between calls (warm L2)"}.get(
        r.between, f"L2 flush {size(r.flush_bytes)} then {r.between.partition('+')[2]}'s call before every call"
    )  # fmt: skip
    console.print(
        f"{r.iters} rounds × {len(plan.runnable)} arms ({order}), {r.warmup} warm-up calls each, "
        f"{before}{', CUDA graphs' if r.graphs else ''}"
        f"{', shuffled pages' if r.shuffle else ''}; validation {'on' if r.validate else 'off'}"
    )
    console.print(Text.assemble(("run folder: ", "bold"), str(plan.folder)))
    console.print(Text.assemble(("command: ", "bold"), " ".join(plan.command())))


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
            table.add_row(
                Text(shorten(r["name"], 70)), f"{count(r['before_n'])} → {count(r['after_n'])}", signed_count(r["delta_n"]),
                f"{ms(r['before_ms'])} → {ms(r['after_ms'])}", signed_ms(r["delta_ms"]), signed_pct(r["delta_pct"]),
            )  # fmt: skip
        console.print(table)


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
            Text(row["report"]), count(row["gpu_ops"]), us_from_ns(row["gpu_span_ns"]), us_from_ns(row["busy_ns"]),
            us_from_ns(row["gpu_sum_ns"]), *[us_from_ns(row[c]) for c in roles], decimals(row["seconds"], 2),
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
            Text(shorten(row[key], 56)), str(row["reports"]), count(row["rows"]), us_from_ns(row[f"rank_median_{stat}"]),
            us_from_ns(row[f"rank_max_{stat}"]), f"{us_from_ns(row[f'spread_{stat}'])} ({pct(rel)})" if rel is not None else "",
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
