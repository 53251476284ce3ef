"""``traceattr diff``: what changed between two traces or run folders, or two sets of captures."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import polars as pl
import typer

from traceattr.analysis.diff import diff_tallies, tally
from traceattr.analysis.fail_on import DIFF_CONDITIONS, diff_failures
from traceattr.cli import app
from traceattr.cli.decide import DECISION_FAILS, DiffFailOnOpt
from traceattr.cli.table_options import TableFormat, WideOpt
from traceattr.core.errors import TraceattrError
from traceattr.core.output import ResultSet, check_out_folder, csv_text
from traceattr.core.runfolder import PHASES, round_folder_of
from traceattr.jobs.many import expand_inputs
from traceattr.present.console import console
from traceattr.present.difftable import render_diff
from traceattr.present.names import printable
from traceattr.session import Session

MANIFEST = "diff_run.json"  # names the set in --out DIR; see traceattr.core.output.ResultSet
SEPARATOR = "vs"  # between the before and the after captures: diff a1 a2 vs b1 b2


def sides(paths: list[str]) -> tuple[list[Path], list[Path]]:
    """The captures before and after: ``A B`` (each a trace, a run folder or a folder of traces) or
    ``a1 a2 … vs b1 b2 …``; a one-line error for anything else."""
    if SEPARATOR in paths:
        cut = paths.index(SEPARATOR)
        before, after = paths[:cut], paths[cut + 1 :]
        if SEPARATOR in after:
            raise TraceattrError(f"diff: {SEPARATOR!r} given twice; write: diff a1 a2 {SEPARATOR} b1 b2")
    elif len(paths) == 2:
        before, after = paths[:1], paths[1:]
    else:
        raise TraceattrError(
            f"diff: {len(paths)} paths and no {SEPARATOR!r}; write: diff BEFORE AFTER (traces, run folders or "
            f"folders of traces), or diff a1 a2 {SEPARATOR} b1 b2"
        )
    if not before or not after:
        raise TraceattrError(f"diff: no capture {'before' if not before else 'after'} {SEPARATOR!r}")
    return expand_inputs(before), expand_inputs(after)


@app.command("diff")
def diff_command(
    paths: Annotated[
        list[str],
        typer.Argument(
            help="BEFORE AFTER: traces (.sqlite, .nsys-rep), run folders, or folders of traces (several captures "
            f"a side); or several paths a side split by the word {SEPARATOR!r}: a1 a2 {SEPARATOR} b1 b2.",
            show_default=False,
        ),
    ],
    top: Annotated[int, typer.Option(help="Kernels and range names shown per table (0: all).")] = 15,
    out: Annotated[
        Optional[Path],
        typer.Option("--out", "-o", help="Write diff.csv and diff.json here (and phases.csv: both sides stamped)."),
    ] = None,
    fail_on: DiffFailOnOpt = [],  # noqa: B006  (typer reads the default; never mutated)
    wide: WideOpt = False,
    form: Annotated[
        TableFormat,  # type: ignore[valid-type]
        typer.Option("--format", "-f", help="table (the terminal's), or diff.csv's rows as csv or json on stdout."),
    ] = TableFormat.table,  # type: ignore[attr-defined]
) -> None:
    """Per kernel, role and NVTX range name: calls, GPU time and time per call before → after, the change split into count and per call.

    The change in time is "from count" (calls gained or lost) plus "from per call" (each call slower or faster);
    with several captures a side, a 95% interval on the per-call change. Percentages are in percent everywhere
    (the *_pct columns of diff.csv/json too).

    Examples: traceattr diff before.sqlite after.sqlite · traceattr diff before/ after/ · traceattr diff a1.sqlite
    a2.sqlite vs b1.sqlite b2.sqlite
    """
    wrong = [c for c in fail_on if c not in DIFF_CONDITIONS]
    if wrong:  # refused before the work
        raise TraceattrError(
            f"--fail-on {wrong[0]!r}: not a diff condition (one of {', '.join(sorted(DIFF_CONDITIONS))})"
        )
    con = console(wide)  # a COLUMNS too narrow is refused before the work
    rounds = list(dict.fromkeys(r for r in map(round_folder_of, map(Path, paths)) if r is not None))
    before, after = sides(paths)
    inputs = (*before, *after)
    if out is not None:  # refused before the work, not after it
        check_out_folder(out, command="diff", manifest=MANIFEST, inputs=inputs)
    from traceattr.present.steps import (  # on stderr, a terminal only: a big trace takes seconds per step
        attributing,
        steps,
    )

    with steps() as step:

        def tallied(path: Path, side: str) -> pl.DataFrame:  # one capture at a time: only its tally is kept
            session = Session(path)
            step(f"{side}: read {path}")
            loaded = session.trace
            step(f"{side}: {attributing(loaded)}")
            return tally(session.attribute())

        tallies = [tallied(p, "before") for p in before], [tallied(p, "after") for p in after]
        step("compare before and after")
        d = diff_tallies(*tallies)
    from traceattr.present.phases import load_diff

    phases = load_diff(before, after)  # in-kernel stamps on both sides: per phase the change (docs/phases.md)
    if form.value == "csv":
        sys.stdout.write(csv_text(d))
    elif form.value == "json":
        sys.stdout.write(d.write_json() + "\n")
    for folder in (
        rounds if form.value == "table" else ()
    ):  # a round folder is its receipt, here too: its verdicts and gates lead
        from traceattr.jobs.round import read_receipt
        from traceattr.present.phases import load_round
        from traceattr.present.receipt_view import render_receipt

        receipt = read_receipt(folder)
        render_receipt(receipt, con, load_round(receipt, folder))
    if form.value == "table":
        render_diff(d, con, top, captures=(len(before), len(after)))
        if phases is not None:
            from traceattr.present.phases import render_diff_phases

            render_diff_phases(phases, con)
    if out is not None:
        with ResultSet(out, command="diff", manifest=MANIFEST, inputs=inputs) as result:
            files = [result.table(d, "diff", "csv"), result.table(d, "diff", "json")]
            if phases is not None:
                from traceattr.present.phases import deltas_frame

                files.append(result.table(deltas_frame(phases.comparisons), PHASES, "csv"))
            result.write_manifest({"inputs": [str(p) for p in inputs], "before": [str(p) for p in before],
                                   "after": [str(p) for p in after]})  # fmt: skip
        print(f"wrote {', '.join(map(str, files))}", file=sys.stderr)
    met = diff_failures(d, fail_on)
    for line in met:
        print(f"fail: {printable(line)}", file=sys.stderr)
    if met:
        raise typer.Exit(DECISION_FAILS)
