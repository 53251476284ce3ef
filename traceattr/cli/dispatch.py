"""``traceattr dispatch``: a dispatch table (``traceattr.dispatch/2``) from sweeps, run folders or traces, with its regret."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import polars as pl
import typer
from rich.markup import escape

from traceattr.analysis.dispatch_table import dispatch_table, parse_histogram
from traceattr.analysis.pipeline import Analysis, analyse, analyse_calls
from traceattr.backends.arms import same_program
from traceattr.cli import app
from traceattr.cli.many import attribute_many, exit_status
from traceattr.cli.options import DaskOpt, GroupOpt, MatchOpt, TracesArg, WorkersOpt, check_group, check_regex
from traceattr.core.errors import NoDataError, TraceattrError
from traceattr.core.output import check_file_target, write_text
from traceattr.core.records import SEARCH, SearchRecord
from traceattr.jobs.many import Settings, expand_inputs, rounds_per_report
from traceattr.present.dispatch import dispatch_table_doc, render_table
from traceattr.session import Session


def sweep_inputs(args: list[Path]) -> list[Path]:
    """*args* with each sweep folder (it holds search.json) replaced by its step run folders that passed."""
    out: list[Path] = []
    for arg in args:
        if arg.is_dir() and (arg / SEARCH).is_file():
            record = SearchRecord.read(arg / SEARCH)
            for name in record.passing_folders:
                stored = Path(name)
                out.append(stored if stored.is_dir() else arg / stored.name)  # the folder may have moved
        else:
            out.append(arg)
    return out


@app.command("dispatch")
def dispatch_command(
    traces: TracesArg,
    out: Annotated[
        Optional[Path], typer.Option("--out", "-o", help="Write the table as JSON (traceattr.dispatch/2) here.")
    ] = None,
    ctx_dist: Annotated[
        Optional[Path],
        typer.Option(
            "--ctx-dist",
            help="Request lengths for the graph-safe choice: one bin a line, `ctx weight` or `low high weight` "
            "(uniform in log ctx). Default: uniform in log ctx over each family's measured range.",
        ),
    ] = None,
    match: MatchOpt = None,
    group: GroupOpt = None,
    workers: WorkersOpt = None,
    dask: DaskOpt = None,
) -> None:
    """A dispatch table per shape family (traceattr.dispatch/2): ctx breakpoints, regret, leave-one-out, graph-safe choice.

    Per family: which backend for which ctx, how much slower than the fastest that is (regret), the same
    for "always backend X", leave-one-out, and the one backend per bucket safe to capture in a CUDA graph.

    Example: traceattr dispatch examples/traces/h200_mla_sweep.sqlite -o table.json

    Inputs: sweep folders (traceattr sweep: the steps that passed their gates), run folders, exports.
    """
    check_regex(match)
    check_group(group)
    bins, distribution = None, ""
    if ctx_dist is not None:
        try:
            text = ctx_dist.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise TraceattrError(f"{ctx_dist}: unreadable ({err})") from None
        bins, distribution = parse_histogram(text, str(ctx_dist)), f"request lengths of {ctx_dist}"
    paths = expand_inputs(sweep_inputs(list(traces)))
    if not paths:
        raise TraceattrError("no run folder passed its gates in the sweep folders given")
    if out is not None:
        check_file_target(out, paths, ours=_is_dispatch)
    status = 0
    if len(paths) == 1:
        att = Session(paths[0]).attribute(match=match)
        analysis = analyse(att, group=group, same_program=same_program)
    else:
        settings = Settings(match=match, calls=True, group=group)
        with attribute_many(paths, settings, workers=workers, dask=dask, out=None) as combined:
            table = combined.calls if combined.calls is not None else pl.DataFrame()
            analysis = analyse_calls(rounds_per_report(table), None, "unknown", same_program=same_program)
            status = exit_status(combined)
    _show_and_write(analysis, out, ", ".join(map(str, paths)), bins, distribution, paths[0])
    raise typer.Exit(status)


def _is_dispatch(head: bytes) -> bool:
    return head.lstrip().startswith(b"{") and b'"traceattr.dispatch/' in head


def _show_and_write(
    analysis: Analysis, out: Path | None, source: str, bins: tuple | None, distribution: str, first: Path
) -> None:
    from traceattr.present.console import console

    if analysis.calls.height == 0 or analysis.note is not None:
        raise NoDataError(first, analysis.note or "has no NVTX ranges with GPU work to compare")
    table = dispatch_table(analysis.summary, analysis.crossovers, bins, distribution)
    if not table.families:
        raise NoDataError(first, "no shape was measured with two or more backends: nothing to dispatch between")
    con = console()
    render_table(table, con)
    if out is not None:
        doc = dispatch_table_doc(analysis.summary, analysis.crossovers, table, source)
        write_text(out, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
        con.print(escape(f"wrote {out}"))
