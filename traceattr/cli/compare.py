"""``traceattr compare``: backends side by side per shape, and the decision rules a sweep implies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from traceattr.analysis.calls import calls
from traceattr.analysis.crossover import crossovers
from traceattr.analysis.roofline import peak_bandwidth
from traceattr.analysis.summary import summarize
from traceattr.cli import app
from traceattr.cli.options import MatchOpt, TraceArg, check_regex
from traceattr.errors import NoDataError
from traceattr.output import write_table
from traceattr.profile import with_events
from traceattr.session import Session
from traceattr.terminal import console, render_rules, render_summary


@app.command("compare")
def compare_command(
    trace: TraceArg,
    out: Annotated[
        Optional[Path], typer.Option("--out", "-o", help="Write calls.csv, summary.csv, crossovers.csv here.")
    ] = None,
    match: MatchOpt = None,
    bandwidth: Annotated[
        Optional[float], typer.Option(help="Peak memory bandwidth in TB/s for the roofline share.")
    ] = None,
) -> None:
    """Per shape: each backend's per-call time, where it goes, and the winner; crossovers along ctx.

    Example: traceattr compare examples/traces/h200_mla_sweep.sqlite
    """
    check_regex(match)
    session = Session(trace)
    att = session.attribute(match=match)
    table = calls(att)
    if table.height == 0:
        raise NoDataError(trace, "has no NVTX ranges with GPU work to compare")
    peak, _ = peak_bandwidth(att.trace.devices, bandwidth * 1e12 if bandwidth else None)
    summary = summarize(table, peak)
    runner = trace / "runner.json" if trace.is_dir() else None
    if runner is not None and runner.exists():  # a profile run folder: add the CUDA-event cross-check
        summary = with_events(summary, table, json.loads(runner.read_text(encoding="utf-8")).get("events", []))
    crossings = crossovers(summary)
    con = console()
    render_summary(summary, con, [])
    render_rules(crossings, con)
    if out is not None:
        for frame, stem in ((table, "calls"), (summary, "summary"), (crossings, "crossovers")):
            write_table(frame, out, stem, "csv")
        con.print(f"wrote {out}/calls.csv, summary.csv, crossovers.csv")
