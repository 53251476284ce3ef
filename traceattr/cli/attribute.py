"""``traceattr attribute``: GPU time per NVTX range and per kernel role."""

from __future__ import annotations

import sys
import time
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from traceattr import __version__
from traceattr.attribution.engine import Attribution, RangeFilter, attribute
from traceattr.attribution.roles import RoleRules
from traceattr.cli import app
from traceattr.cli.options import DomainOpt, MatchOpt, ModeChoice, ModeOpt, RulesOpt, TraceArg, check_regex
from traceattr.errors import TraceattrError
from traceattr.output import write_manifest, write_table
from traceattr.trace.inputs import resolve_trace
from traceattr.trace.loader import load_trace

Format = Enum("Format", {f: f for f in ("table", "csv", "json", "parquet")}, type=str)  # type: ignore[misc]


@app.command("attribute")
def attribute_command(
    trace: TraceArg,
    out: Annotated[
        Optional[Path], typer.Option("--out", "-o", help="Write ranges.<fmt> and kernels.<fmt> here.")
    ] = None,
    fmt: Annotated[
        Format, typer.Option("--format", "-f", help="table (terminal), csv, json or parquet.")
    ] = Format.table,  # type: ignore[attr-defined]
    mode: ModeOpt = ModeChoice.nsys,  # type: ignore[attr-defined]
    domain: DomainOpt = None,
    match: MatchOpt = None,
    rules: RulesOpt = None,
    limit: Annotated[int, typer.Option(help="Ranges shown on the terminal (0: all).")] = 30,
) -> None:
    """Attribute GPU ops to the NVTX ranges that launched them.

    Example: traceattr attribute run.sqlite --match 'traceattr:' --out results/
    """
    started = time.time()
    path = resolve_trace(trace)
    role_rules = RoleRules.load(rules)
    check_regex(match)
    att = attribute(load_trace(path), mode=mode.value, rules=role_rules, select=RangeFilter(domain, match))
    fmt_value = fmt.value
    if out is None:
        if fmt_value == "table":
            _render(att, limit)
        elif fmt_value == "parquet":
            raise TraceattrError("--format parquet needs --out DIR")
        elif fmt_value == "csv":
            sys.stdout.write(att.ranges.with_columns().write_csv())
        else:
            sys.stdout.write(att.ranges.write_json() + "\n")
        return
    file_fmt = "csv" if fmt_value == "table" else fmt_value
    ranges_file = write_table(att.ranges, out, "ranges", file_fmt)
    kernels_file = write_table(att.ops_lazy(), out, "kernels", file_fmt)
    write_manifest(out, "attribution.json", {
        "tool": "traceattr", "version": __version__, "command": "attribute",
        "input": str(path), "nsys_version": att.meta.nsys_version, "schema_version": att.meta.schema_version,
        "mode": att.mode, "domain": domain, "match": match, "rules": str(rules) if rules else None,
        "outputs": [ranges_file.name, kernels_file.name], "notes": list(att.notes),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)), "seconds": round(time.time() - started, 3),
    })  # fmt: skip
    if fmt_value == "table":
        _render(att, limit)
    print(f"wrote {ranges_file}, {kernels_file}", file=sys.stderr)


def _render(att: Attribution, limit: int) -> None:
    # rich's table machinery is imported only when a table is shown: `--out` never pays for it
    from traceattr.terminal import console, render_attribution

    render_attribution(att, console(), limit)
