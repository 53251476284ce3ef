"""``traceattr compare``: backends side by side per shape, and the decision rules a sweep implies."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import polars as pl
import typer
from rich.text import Text

from traceattr import __version__
from traceattr.analysis.calls import comparable, comparable_shapes, reduced_calls
from traceattr.analysis.pipeline import Analysis, analyse, analyse_calls
from traceattr.attribution.engine import RangeFilter
from traceattr.attribution.roles import RoleRules
from traceattr.backends.arms import same_program
from traceattr.cli import app
from traceattr.cli.decide import FailOnOpt, check_fail_on, gate
from traceattr.cli.many import attribute_many, exit_status
from traceattr.cli.options import (
    NOTHING_TO_COMPARE,
    Basis,
    DaskOpt,
    DomainOpt,
    GroupOpt,
    MatchOpt,
    RulesOpt,
    TimeOpt,
    TracesArg,
    WideOpt,
    WorkersOpt,
    check_bandwidth,
    check_group,
    check_regex,
    check_selected,
)
from traceattr.core import runfolder
from traceattr.core.cpus import usable_cpus
from traceattr.core.errors import NoDataError, TraceattrError
from traceattr.core.output import ResultSet, check_file_target, check_out_folder, csv_text, write_text
from traceattr.core.records import runner_events
from traceattr.core.runfolder import round_folder_of
from traceattr.jobs.many import (
    Settings,
    across_traces,
    expand_inputs,
    iterations_per_trace,
    pooled_compute_peak,
    pooled_events,
    trace_events,
)
from traceattr.present.dispatch import decision_doc
from traceattr.present.names import printable
from traceattr.session import Session
from traceattr.trace.inputs import resolve_trace
from traceattr.trace.loader import load_trace

MANIFEST = "compare.json"  # names the set in --out DIR; see traceattr.core.output.ResultSet
Format = Enum("Format", {f: f for f in ("table", "csv", "json")}, type=str)  # type: ignore[misc]


@app.command("compare")
def compare_command(
    traces: TracesArg,
    out: Annotated[
        Optional[Path], typer.Option("--out", "-o", help="Write calls.csv, summary.csv, crossovers.csv, fit.csv here.")
    ] = None,
    fmt: Annotated[
        Format,
        typer.Option(
            "--format",
            "-f",
            help="table (terminal: the verdict, then the tables), or csv / json: the summary "
            "(one row per shape and backend) on stdout, as nsys stats prints its tables; notes go to stderr.",
        ),
    ] = Format.table,  # type: ignore[attr-defined]
    domain: DomainOpt = None,
    match: MatchOpt = None,
    group: GroupOpt = None,
    rules: RulesOpt = None,
    wide: WideOpt = False,
    bandwidth: Annotated[
        Optional[float], typer.Option(help="Peak memory bandwidth in TB/s for the roofline share.")
    ] = None,
    workers: WorkersOpt = None,
    dask: DaskOpt = None,
    json_out: Annotated[
        Optional[Path],
        typer.Option(
            "--json", help="Write the decision rules per shape family as JSON a dispatcher can load (README: schema)."
        ),
    ] = None,
    basis: TimeOpt = Basis.span,  # type: ignore[attr-defined]
    fail_on: FailOnOpt = [],  # noqa: B006  (typer reads the default; never mutated)
) -> None:
    """The verdict first (per shape family the dispatch rule, per shape the winner and its margin), then per shape each backend's per-call time and where it goes, and fixed vs per-token cost along ctx.

    Example: traceattr compare examples/traces/h200_mla_sweep.sqlite

    One rule decides every verdict: per shape, the 95% bootstrap interval of the ratio of median per-call times (another backend over the fastest) must exclude 1, and not lie within ±1% of it (then the two tie), for the fastest to win; a family's dispatch switches where its backends' medians cross, a rule where both sides are really faster. Arms left out of a family's line (the same program as another arm, or measured at fewer ctx) are named beside it.

    Nothing to compare (no name reads as backend + shape, or no shape has two backends): one note, exit status 2.

    Many traces: the calls of all of them are pooled (calls.csv gets a `trace` column; a round is
    one iteration of one trace), traces.csv has one row per trace and across_traces.csv lines
    up each call series per trace (rank): medians, spread, slowest trace. A trace that cannot
    be read fails alone (its reason is printed, exit status 2).
    """
    check_regex(match)
    check_group(group)
    role_rules = RoleRules.load(rules)
    check_bandwidth(bandwidth)
    check_fail_on(fail_on)
    rounds = [r for r in map(round_folder_of, traces) if r is not None]
    if rounds:  # a round folder, or one of its captures: its receipt speaks
        if len(traces) > 1:
            raise TraceattrError(f"{rounds[0]}: a round folder is compared alone (its receipt is its answer)")
        _compare_round(traces[0], rounds[0], json_out, Shown(fmt.value, wide), fail_on)
        return
    paths = expand_inputs(traces)
    for path in paths:
        _not_a_record(path)
    # refused before the work, not after it
    if out is not None:
        check_out_folder(out, command="compare", manifest=MANIFEST, inputs=paths)
    if json_out is not None:
        check_file_target(json_out, paths, ours=_is_dispatch)
    peak = bandwidth * 1e12 if bandwidth else None
    shown = Shown(fmt.value, wide)
    if len(paths) > 1:
        settings = Settings(domain=domain, match=match, rules=str(rules) if rules else None, calls=True, group=group)
        _compare_many(paths, settings, out, json_out, peak, workers, dask, shown, fail_on, basis.value)
        return
    trace = paths[0]
    from traceattr.present.steps import attributing, steps  # on stderr, a terminal only: seconds per step

    with steps() as step:
        step(f"read {trace}")
        # handed over, not held here (the list gives it up): the attribution lets go of what it no longer needs,
        # and compare shows no op, so no launch configuration is read
        held = [load_trace(resolve_trace(trace), launch_config=False)]
        step(attributing(held[0]))
        # the attribution reduced to its calls as it is made: compare reads no range or op beyond them. On 2 cores
        # one window at a time: compare's peak is the windows' end, where two windows side by side hold a second
        # window's scratch over the calls made (nested trace, 3 runs each: 242-250 -> 220-227 MB, nsys stats 235;
        # +0.2-0.3 s of 1.1-1.4). With more cores the second window's thread is a core of its own: one at a time
        # made compare 1.55x (nested) and 1.70x (sweep) attribute's wall on a 16-core host (benchmarks/README.md)
        att, calls = reduced_calls(
            held.pop(), rules=role_rules, select=RangeFilter(domain, match), group=group,
            threads=1 if usable_cpus() <= 2 else None,
        )  # fmt: skip
        check_selected(att, domain, match)
        step("analyse the calls")
        # a profile run folder: add the CUDA-event cross-check
        events = runner_events(trace)
        analysis = analyse(
            att, peak_bytes_per_s=peak, events=events, group=group, same_program=same_program, basis=basis.value,
            calls=calls,
        )  # fmt: skip
    if analysis.calls.height == 0:
        raise NoDataError(trace, "has no NVTX ranges with GPU work to compare")
    from traceattr.present.phases import load, median_frame, render_phases

    # the run folder's in-kernel stamps (docs/phases.md), read before anything is written; csv/json print the summary
    phases = load(trace, peak) if out is not None or shown.fmt == "table" else None
    extra = () if phases is None else ((median_frame(phases), runfolder.PHASES),)
    _show_and_write(analysis, out, json_out, str(trace), *extra, inputs=paths, notes=att.notes, shown=shown)
    if phases is not None and shown.fmt == "table":
        from traceattr.present.console import console

        render_phases(phases, console(shown.wide))
    if analysis.note is not None:
        raise typer.Exit(NOTHING_TO_COMPARE)
    gate(analysis.decision, fail_on)


@dataclass(frozen=True)
class Shown:
    """How compare prints: *fmt* (table, csv, json) and, for a table, whether every column is shown (*wide*)."""

    fmt: str
    wide: bool


def _compare_many(
    paths: list[Path],
    settings: Settings,
    out: Path | None,
    json_out: Path | None,
    peak: float | None,
    workers: int | None,
    dask: str | None,
    shown: Shown,
    fail_on: list[str],
    basis: str,
) -> None:
    with attribute_many(paths, settings, workers=workers, dask=dask, out=None) as combined:
        table = combined.calls if combined.calls is not None else pl.DataFrame()
        if table.height == 0:
            raise NoDataError(paths[0].parent, "none of the traces has NVTX ranges with GPU work to compare")
        if peak is None:  # the first trace whose GPU is known
            known = combined.traces.filter(pl.col("peak_bytes_per_s").is_not_null())
            peak = known["peak_bytes_per_s"][0] if known.height else None
        compute, notes = pooled_compute_peak(combined.traces)  # the roofline's GPU, or why there is none
        analysis = analyse_calls(
            iterations_per_trace(table), peak, "given" if peak else "unknown device", same_program=same_program,
            source=", ".join(map(str, paths)), basis=basis, compute_peak=compute,
            events=pooled_events(table, trace_events(combined.traces)),
        )  # fmt: skip
        extra = ((combined.traces, runfolder.TRACES), (across_traces(table, "series"), runfolder.ACROSS_TRACES))
        _show_and_write(
            analysis, out, json_out, ", ".join(map(str, paths)), *extra, inputs=paths, notes=notes, shown=shown
        )
        status = NOTHING_TO_COMPARE if analysis.note is not None else exit_status(combined)
        if status == 0:
            gate(analysis.decision, fail_on)
        raise typer.Exit(status)


def _compare_round(given: Path, folder: Path, json_out: Path | None, shown: Shown, fail_on: list[str]) -> None:
    """A round folder (or one of its captures): the receipt, the decision it states, then a capture's tables with
    the rows the round refused left out, never a verdict the receipt does not give."""
    from traceattr.analysis.round_decision import receipt_decision
    from traceattr.jobs.round import read_receipt
    from traceattr.present.comparison import render_summary
    from traceattr.present.console import console
    from traceattr.present.phases import load, load_round, render_phases
    from traceattr.present.receipt_view import render_round

    receipt = read_receipt(folder)
    decision = receipt_decision(receipt, str(folder))
    if json_out is not None:
        check_file_target(json_out, [folder / f"{runfolder.RECEIPT}.json"], ours=_is_dispatch)
    con = console(shown.wide)
    phases = load_round(receipt, folder) if shown.fmt == "table" else None
    if shown.fmt == "json":
        sys.stdout.write(json.dumps(decision.to_json(), indent=1, ensure_ascii=False) + "\n")
    elif shown.fmt == "csv":
        sys.stdout.write(csv_text(receipt.final.select("row", "shape", "status", "verdict", "ratio", "low", "high",
                                                       "baseline_us", "candidate_us", "refused_by")))  # fmt: skip
    else:
        render_round(receipt, decision, con, phases)
        capture = given if given != folder else None
        if capture is not None:
            att = Session(capture).attribute()
            analysis = analyse(att, events=runner_events(capture), same_program=same_program)
            kept = analysis.summary.filter(~pl.col("shape").is_in(list(decision.refused)) & comparable())
            # the capture's numbers, not its verdicts: the receipt judged the rows over every capture
            quiet = kept.with_columns(pl.lit(None, pl.String).alias("verdict"), pl.lit(False).alias("winner"))
            con.print(Text(printable(f"{capture}: this capture's calls (the verdicts above are the round's)"), "bold"))
            render_summary(quiet, con, [])
            if decision.refused:
                con.print(Text(printable(f"not shown (refused by the round): {', '.join(sorted(decision.refused))}")))
            captured = load(capture)
            if captured is not None:
                render_phases(captured, con)
        else:
            con.print(Text(printable(f"each capture's calls: traceattr compare {folder}/<capture>"), "dim"))
    if json_out is not None:
        write_text(json_out, json.dumps(decision_doc(decision), indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {json_out}", file=sys.stderr)
    gate(decision, fail_on)


def _is_dispatch(head: bytes) -> bool:
    """The start of a decision-rules JSON traceattr wrote (the only file ``--json`` may replace)."""
    return head.lstrip().startswith(b"{") and b'"traceattr.dispatch/' in head


def _show_and_write(
    analysis: Analysis,
    out: Path | None,
    json_out: Path | None,
    source: str,
    *extra: tuple[pl.DataFrame, str],
    inputs: Sequence[Path] = (),
    notes: Sequence[str] = (),
    shown: Shown,
) -> None:
    from traceattr.present.comparison import render_fit, render_summary, render_verdicts
    from traceattr.present.console import console
    from traceattr.present.terminal import render_across, render_notes, render_traces

    con = console(shown.wide)
    compared = comparable_shapes(analysis.calls) if analysis.note is None else []
    summary = analysis.summary.filter(pl.col("shape").is_in(compared))
    if analysis.note is not None:  # no winner to print: say why, in one line
        render_notes([analysis.note], con)
    if shown.fmt == "csv":
        sys.stdout.write(csv_text(summary))
    elif shown.fmt == "json":
        sys.stdout.write(summary.write_json() + "\n")
    elif analysis.note is None:
        alone = analysis.summary.filter(~pl.col("shape").is_in(compared))["shape"].unique().sort().to_list()
        render_verdicts(analysis.decision, con, compared)  # the answer first
        render_summary(summary, con, [])
        if alone:
            con.print(Text(printable(f"not compared (one backend each): {', '.join(alone)}")))
    if shown.fmt == "table":
        render_fit(analysis.fit, con)
        for frame, stem in extra:
            if stem == runfolder.TRACES:
                render_traces(frame, con)
            elif stem == runfolder.ACROSS_TRACES:
                render_across(frame, con, "series")
    render_notes(notes, con)  # what the loader and the attribution had to assume about this trace
    if json_out is not None:
        doc = decision_doc(analysis.decision, source=source)  # nothing compared (a note): no family, no rule
        write_text(json_out, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {json_out}", file=sys.stderr)
    if out is not None:
        tables = (
            (analysis.calls, runfolder.CALLS),
            (analysis.summary, runfolder.SUMMARY),  # in the terminal's order (summary.in_context_order)
            (analysis.crossovers, runfolder.CROSSOVERS),
            (analysis.fit, runfolder.FIT),
            *extra,
        )
        with ResultSet(out, command="compare", manifest=MANIFEST, inputs=inputs) as result:
            for frame, stem in tables:
                result.table(frame, stem, "csv")
            result.write_manifest({"version": __version__, "inputs": [str(p) for p in inputs]})
        written = ", ".join([*(f"{stem}.csv" for _, stem in tables), MANIFEST])
        print(printable(f"wrote {result.folder}/{written}"), file=sys.stderr)


def _not_a_record(path: Path) -> None:
    """A sweep's search.json or a dispatch table given to compare: one line saying which command reads it."""
    if path.suffix.lower() != ".json" or not path.is_file():
        return
    try:
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError:
        return  # the reader says why
    if head.lstrip().startswith(b"{") and b'"traceattr.' in head:
        raise TraceattrError(
            f"{path}: a traceattr record (a sweep's search.json or a dispatch table), not a trace; "
            f"`traceattr report {path}` draws it, `traceattr dispatch {path}` makes its dispatch table"
        )
