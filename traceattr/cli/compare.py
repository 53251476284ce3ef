"""``traceattr compare``: backends side by side per shape, and the decision rules a sweep implies."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from traceattr import runfolder
from traceattr.analysis.pipeline import analyse
from traceattr.cli import app
from traceattr.cli.options import MatchOpt, TraceArg, check_regex
from traceattr.errors import NoDataError
from traceattr.output import write_table
from traceattr.session import Session
from traceattr.terminal import console, render_fit, render_rules, render_summary


@app.command("compare")
def compare_command(
    trace: TraceArg,
    out: Annotated[
        Optional[Path], typer.Option("--out", "-o", help="Write calls.csv, summary.csv, crossovers.csv, fit.csv here.")
    ] = None,
    match: MatchOpt = None,
    bandwidth: Annotated[
        Optional[float], typer.Option(help="Peak memory bandwidth in TB/s for the roofline share.")
    ] = None,
) -> None:
    """Per shape: each backend's per-call time, where it goes, and the winner; crossovers and fixed vs per-token cost along ctx.

    Example: traceattr compare examples/traces/h200_mla_sweep.sqlite
    """
    check_regex(match)
    session = Session(trace)
    att = session.attribute(match=match)
    runner = runfolder.read_json(trace, runfolder.RUNNER)  # a profile run folder: add the CUDA-event cross-check
    analysis = analyse(
        att,
        peak_bytes_per_s=bandwidth * 1e12 if bandwidth else None,
        events=runner.get("events", []) if runner is not None else None,
    )
    table, summary, crossings, line = analysis.calls, analysis.summary, analysis.crossovers, analysis.fit
    if table.height == 0:
        raise NoDataError(trace, "has no NVTX ranges with GPU work to compare")
    con = console()
    render_summary(summary, con, [])
    render_rules(crossings, con)
    render_fit(line, con)
    if out is not None:
        stems = (runfolder.CALLS, runfolder.SUMMARY, runfolder.CROSSOVERS, runfolder.FIT)
        for frame, stem in zip((table, summary, crossings, line), stems, strict=True):
            write_table(frame, out, stem, "csv")
        con.print(f"wrote {out}/" + ", ".join(f"{stem}.csv" for stem in stems))
