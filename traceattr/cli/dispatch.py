"""``traceattr dispatch``: a dispatch table (``traceattr.dispatch/2``) from sweeps, run folders or traces, with its regret;
given eager and ``--graphs`` inputs, one per mode and how they differ (``traceattr.dispatch-modes/1``)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Optional

import polars as pl
import typer
from rich.console import Console

from traceattr.analysis.crossover import with_family
from traceattr.analysis.decision import Decision, Provenance, decide, frame_crossings
from traceattr.analysis.dispatch_table import dispatch_table, parse_histogram
from traceattr.analysis.mode_compare import compare_tables
from traceattr.analysis.pipeline import analyse, analyse_calls
from traceattr.analysis.sweep_points import SUMMARY_COLUMNS, dispatch_frames
from traceattr.backends.arms import same_program
from traceattr.cli import app
from traceattr.cli.many import attribute_many, exit_status
from traceattr.cli.options import (
    DaskOpt,
    GroupOpt,
    MatchOpt,
    TableFormat,
    TracesArg,
    WideOpt,
    WorkersOpt,
    check_group,
    check_regex,
)
from traceattr.core import runfolder
from traceattr.core.errors import NoDataError, TraceattrError
from traceattr.core.output import check_file_target, csv_text, write_text
from traceattr.core.records import SweepRecord, read_runner, sweep_file
from traceattr.core.shapes import parse_shape
from traceattr.core.textfile import read_user_text
from traceattr.jobs.many import Settings, expand_inputs, iterations_per_trace
from traceattr.present.dispatch import dispatch_table_doc, render_table, segments_frame
from traceattr.present.dispatch_modes import modes_doc, render_modes
from traceattr.present.names import printable
from traceattr.present.terminal import render_notes
from traceattr.session import Session


def sweep_record(arg: Path) -> SweepRecord | None:
    """The sweep record *arg* names (a sweep folder holding sweep.json, or such a file), else None."""
    found = sweep_file(arg) if arg.is_dir() else None
    if found is not None:
        return SweepRecord.read(found)
    if arg.suffix == ".json" and arg.is_file():
        return SweepRecord.read(arg)
    return None


def record_frames(records: list[tuple[Path, SweepRecord]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(summary, crossings) of the sweeps' gated points, one family measured by one sweep at most."""
    summaries, crossings, owner = [], [], {}
    for path, record in records:
        summary, cross = dispatch_frames(record)
        for shape in summary["shape"].unique().to_list():
            family = parse_shape(shape).family
            if owner.setdefault(family, path) != path:
                raise TraceattrError(f"{owner[family]} and {path} both measured {family} in one mode: give one "
                                     "sweep per family and mode")  # fmt: skip
        summaries.append(summary)
        crossings.append(cross)
    return pl.concat(summaries), pl.concat(crossings)


@app.command("dispatch")
def dispatch_command(
    traces: TracesArg,
    out: Annotated[
        Optional[Path],
        typer.Option(
            "--out",
            "-o",
            help="Write the table as JSON (traceattr.dispatch/2) here; eager and --graphs inputs: both tables and "
            "their comparison (traceattr.dispatch-modes/1).",
        ),
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
    wide: WideOpt = False,
    form: Annotated[
        TableFormat,  # type: ignore[valid-type]
        typer.Option(
            "--format", "-f", help="table (the terminal's); csv: one row per family and segment; json: the document."
        ),
    ] = TableFormat.table,  # type: ignore[attr-defined]
) -> None:
    """A dispatch table per shape family (traceattr.dispatch/2): ctx breakpoints, regret, leave-one-out, graph-safe choice.

    Per family: which backend for which ctx, how much slower than the fastest that is (regret), the same
    for "always backend X", leave-one-out, and the one backend per bucket safe to capture in a CUDA graph.

    Example: traceattr dispatch examples/traces/h200_mla_sweep.sqlite -o table.json

    Inputs: sweeps (a sweep folder or its sweep.json: the points that passed their gates, with the
    sweep's own verdicts), run folders, exports.

    Eager and --graphs inputs (a sweep's record, a run folder's runner.json say which): one table per mode,
    side by side, the ctx where the choice flips, and the regret of shipping the eager table under graphs.
    Example: traceattr dispatch examples/sweeps/h200_q8_fa3_flashmla_eager_lead.json
    examples/sweeps/h200_q8_fa3_flashmla_graphs_lead.json
    """
    from traceattr.present.console import console

    check_regex(match)
    check_group(group)
    con = console(wide)  # a COLUMNS too narrow is refused before the work
    show = _Show(con, form.value)
    bins, distribution = None, ""
    if ctx_dist is not None:
        try:
            text = read_user_text(ctx_dist)
        except OSError as err:
            raise TraceattrError(f"{ctx_dist}: unreadable ({err.strerror or err})") from None
        except UnicodeDecodeError as err:
            raise TraceattrError(f"{ctx_dist}: unreadable (not UTF-8 text, byte {err.start})") from None
        bins, distribution = parse_histogram(text, str(ctx_dist)), f"request lengths of {ctx_dist}"
    rounds = [folder for folder in map(runfolder.round_folder_of, traces) if folder is not None]
    if rounds:  # a round folder, or one of its captures: the table of what its receipt states
        from traceattr.analysis.round_decision import receipt_decision
        from traceattr.jobs.round import read_receipt

        if len(traces) > 1:
            raise TraceattrError(f"{rounds[0]}: a round folder's table is its receipt's: give it alone")
        if out is not None:
            check_file_target(out, [rounds[0] / f"{runfolder.RECEIPT}.json"], ours=_is_dispatch)
        decision = receipt_decision(read_receipt(rounds[0]), str(rounds[0]))
        _show_and_write(show, decision, out, bins, distribution, rounds[0])
        raise typer.Exit(0)
    found = [(arg, sweep_record(arg)) for arg in traces]
    records = [(arg, r) for arg, r in found if r is not None]
    paths = expand_inputs([arg for arg, r in found if r is None]) if len(records) < len(found) else []
    if out is not None:
        check_file_target(out, [*paths, *(arg for arg, _ in records)], ours=_is_dispatch)
    modes = {arg: bool(r.header.get("graphs")) for arg, r in records} | {p: _run_mode(p) for p in paths}
    known = {m for m in modes.values() if m is not None}
    settings = _Inputs(match, group, workers, dask)
    if len(known) == 2:  # eager and --graphs among the inputs: one table per mode, and how they differ
        unknown = [str(arg) for arg, m in modes.items() if m is None]
        if unknown:
            raise TraceattrError(f"{unknown[0]}: no runner.json says whether it ran eager or with --graphs: "
                                 "give inputs of known mode to compare the modes")  # fmt: skip
        by_mode = {
            m: _decision([(a, r) for a, r in records if modes[a] == m], [p for p in paths if modes[p] == m], settings)
            for m in (False, True)
        }
        (eager, s0), (graphs, s1) = by_mode[False], by_mode[True]
        _show_and_write_modes(show, eager, graphs, out, bins, distribution)
        raise typer.Exit(max(s0, s1))
    decision, status = _decision(records, paths, settings)
    mode = None if len(known) != 1 or None in modes.values() else ("graphs" if known == {True} else "eager")
    _show_and_write(show, decision, out, bins, distribution, (records[0][0] if records else paths[0]), mode)
    raise typer.Exit(status)


@dataclass(frozen=True)
class _Inputs:
    """How traces are read (the command's options), for each mode's decision alike."""

    match: str | None
    group: str | None
    workers: int | None
    dask: str | None


def _decision(records: list[tuple[Path, SweepRecord]], paths: list[Path], how: _Inputs) -> tuple[Decision, int]:
    """The decision of one mode's inputs (sweeps and traces pooled by family), and the exit status of reading them."""
    status = 0
    frames = []
    if records:
        frames.append(record_frames(records))
        if frames[0][0].height == 0:
            raise NoDataError(records[0][0], "no point of the sweep passed its gates: nothing to dispatch")
    if paths:
        if len(paths) == 1:
            att = Session(paths[0]).attribute(match=how.match)
            analysis = analyse(att, group=how.group, same_program=same_program)
        else:
            settings = Settings(match=how.match, calls=True, group=how.group)
            with attribute_many(paths, settings, workers=how.workers, dask=how.dask, out=None) as combined:
                table = combined.calls if combined.calls is not None else pl.DataFrame()
                analysis = analyse_calls(iterations_per_trace(table), None, "unknown", same_program=same_program)
                status = exit_status(combined)
        if analysis.calls.height == 0 or analysis.note is not None:
            raise NoDataError(paths[0], analysis.note or "has no NVTX ranges with GPU work to compare")
        frames.append((analysis.summary, analysis.crossovers))
    source = ", ".join(str(p) for p in [*(arg for arg, _ in records), *paths])
    if records:
        summary, crossings = frames[0] if len(frames) == 1 else _pooled(*frames)
        return decide(summary, frame_crossings(crossings), Provenance(source=source)), status
    return replace(analysis.decision, provenance=replace(analysis.decision.provenance, source=source)), status


def _pooled(
    sweeps: tuple[pl.DataFrame, pl.DataFrame], traces: tuple[pl.DataFrame, pl.DataFrame]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The sweeps' frames beside the traces' (the columns the table reads).

    A family measured by both is pooled by shape: the sweep's gated points, and the traces' shapes the
    sweep did not measure (a bisection sees only its bracket: on the H200 a grid found FlashMLA slower
    again at 200k–262k, above the one crossover the sweep bracketed). The inputs of one mode only: eager
    and ``--graphs`` inputs are split before (one table each, compared)."""
    both = set(with_family(sweeps[0])["family"].to_list()) & set(with_family(traces[0])["family"].to_list())
    others = traces[0].filter(~pl.col("shape").is_in(sweeps[0]["shape"].unique().to_list()))
    if both:
        counts = with_family(others).filter(pl.col("family").is_in(sorted(both)))["shape"].n_unique()
        render_notes([f"{', '.join(sorted(both))}: pooled the sweep's gated points with {counts} other shapes of the "
             "traces (a shape both measured: the sweep's)"])  # fmt: skip
    summary = pl.concat([sweeps[0], others.select(SUMMARY_COLUMNS).cast(dict(sweeps[0].schema))])
    return summary, pl.concat([sweeps[1], traces[1]])


def _run_mode(path: Path) -> bool | None:
    """Whether the run folder of *path* ran with ``--graphs`` (runner.json's protocol); None: not said."""
    runner = read_runner(path if path.is_dir() else path.parent)
    return None if runner is None else runner.protocol.graphs


def _is_dispatch(head: bytes) -> bool:  # a dispatch/1, /2 or dispatch-modes/1 document
    return head.lstrip().startswith(b"{") and (b'"traceattr.dispatch/' in head or b'"traceattr.dispatch-modes/' in head)


@dataclass(frozen=True)
class _Show:
    """Where the table goes: the console, as a table or its rows (csv) or document (json) on stdout."""

    con: Console
    form: str


def _show_and_write(
    show: _Show,
    decision: Decision,
    out: Path | None,
    bins: tuple | None,
    distribution: str,
    first: Path,
    mode: str | None = None,
) -> None:
    """*mode*: ``eager``/``graphs`` when every input said it (the document then says it: the dispatcher refuses
    an eager table under graphs unless told); None: not written."""
    table = dispatch_table(None, None, bins, distribution, decision=decision)
    if not table.families:
        raise NoDataError(first, "no shape was measured with two or more backends: nothing to dispatch between")
    doc = dispatch_table_doc(decision, table) | ({} if mode is None else {"mode": mode})
    if show.form == "csv":
        sys.stdout.write(csv_text(segments_frame(table)))
    elif show.form == "json":
        sys.stdout.write(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    else:
        render_table(table, show.con)
    if out is not None:
        write_text(out, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {printable(str(out))}", file=sys.stderr)


def _show_and_write_modes(
    show: _Show, eager: Decision, graphs: Decision, out: Path | None, bins: tuple | None, dist: str
) -> None:
    """Both modes' tables and how they differ (:func:`compare_tables`), shown and, with -o, written."""
    tables = [dispatch_table(None, None, bins, dist, decision=d) for d in (eager, graphs)]
    cmp = compare_tables(*tables)
    doc = modes_doc(eager, graphs, cmp)
    if show.form == "csv":
        rows = [segments_frame(t, mode) for t, mode in zip(tables, ("eager", "graphs"), strict=True)]
        sys.stdout.write(csv_text(pl.concat(rows)))
    elif show.form == "json":
        sys.stdout.write(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    else:
        render_modes(cmp, show.con)
    if out is not None:
        write_text(out, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {printable(str(out))}", file=sys.stderr)
