"""Rich tables for the terminal: what an attribution says, at a glance."""

from __future__ import annotations

import hashlib

import polars as pl
from rich.console import Console
from rich.table import Table
from rich.text import Text

from traceattr.attribution.engine import ROLE_COLUMNS, Attribution


def _us(ns: int | float | None) -> str:
    return "" if ns is None else f"{ns / 1000:,.1f}"


def _short(name: str | None, width: int) -> str:
    if name is None:
        return ""
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


def console() -> Console:
    """A console that is wide enough for the tables when output is not a terminal."""
    con = Console()
    return con if con.is_terminal else Console(width=160)


def render_attribution(att: Attribution, console: Console, limit: int = 30) -> None:
    meta = att.meta
    ranges = att.ranges
    # ranges with GPU work in order of their first op (as nsys lists them), buckets last
    with_ops = ranges.filter(pl.col("gpu_ops") > 0).sort(
        pl.col("range_id").is_null(), "gpu_start_ns", "range_id", nulls_last=True, maintain_order=True
    )
    console.print(
        Text.assemble(
            (str(meta.path), "bold"),
            f"  nsys {meta.nsys_version or '?'} (schema {meta.schema_version or '?'})  mode {att.mode}  "
            f"{att.trace.gpu_ops.height:,} GPU ops  {ranges.filter(pl.col('range_id').is_not_null()).height:,} ranges",
        )
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
    silent = ranges.filter((pl.col("gpu_ops") == 0) & pl.col("range_id").is_not_null()).height
    if silent:
        console.print(f"{silent:,} ranges launched no GPU work")
    render_kernels(att, console)
    for note in att.notes:
        console.print(f"[yellow]note:[/yellow] {note}")


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
            Text(_short(label, 70)), str(row["role"]), row["family"] or "", f"{row['n']:,}",
            _us(row["total"]), _us(row["median"]), f"{100 * row['total'] / total:.1f}%",
        )  # fmt: skip
    console.print(table)
    if per.height > top:
        console.print(f"… {per.height - top:,} more op names")
