"""``traceattr round``: A/B one arm against another over a row set, with gates and receipts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from traceattr.analysis.round_decision import receipt_decision
from traceattr.analysis.rounds import Gates
from traceattr.cli import app, options_given
from traceattr.cli.decide import FailOnOpt, check_fail_on, gate
from traceattr.cli.options import GatesOption, protocol_options
from traceattr.core.errors import TraceattrError
from traceattr.core.progress import parse
from traceattr.core.protocol import CAPTURES, ROUND, Protocol
from traceattr.jobs.round import ROW_SETS, RoundJob, RoundResult, round_job
from traceattr.present.columns import print_wrapped
from traceattr.present.console import console
from traceattr.present.receipt_view import render_round

_RETRY_MAY_SET = {"retry", "captures", "out_root", "dry_run"}


RowsOpt = Annotated[
    Optional[str], typer.Option("--rows", help=f"File of shapes (one a line) or a named set: {', '.join(ROW_SETS)}.")
]
BaselineOpt = Annotated[Optional[str], typer.Option("--baseline", help="The shipped arm (e.g. fa3).")]
CandidateOpt = Annotated[
    Optional[str], typer.Option("--candidate", help="The lever (e.g. 'fa3\\[splits=4]'; A/A: again=fa3).")
]
CapturesOpt = Annotated[
    Optional[int],
    typer.Option(
        "--captures", "--rounds",  # /1 names: --rounds kept for scripts written before
        help=f"Separate captures (nsys runs); arm order alternates between them (--rounds: its old name). "  # /1 names
        f"\\[default: {CAPTURES}]",
    ),
]  # fmt: skip
RetryOpt = Annotated[
    Optional[Path], typer.Option("--retry", help="A receipt.json (or its round folder): re-measure its refused rows.")
]
OutRootOpt = Annotated[Path, typer.Option("--out-root", help="Round folders are created here.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Print the captures a round would run and stop.")]


@app.command("round")
@protocol_options("round")
def round_command(
    ctx: typer.Context, rows: RowsOpt = None, baseline: BaselineOpt = None, candidate: CandidateOpt = None,
    captures: CapturesOpt = None, protocol: Protocol = ROUND, gates: GatesOption = Gates, retry: RetryOpt = None,
    out_root: OutRootOpt = Path("reports"), dry_run: DryRunOpt = False, fail_on: FailOnOpt = [],  # noqa: B006
) -> None:  # fmt: skip
    """A/B a candidate arm against a baseline over a row set: per-row ratio, verdict and gates, PR-ready receipts.

    Example: traceattr round --rows decode-h200 --baseline fa3 --candidate 'fa3\\[splits=4]'
    """
    check_fail_on(fail_on)
    if retry is not None:
        # a retry measures as the round did, or its attempts could not sit in one receipt
        _refuse_given(options_given(ctx, (name for name in ctx.params if name not in _RETRY_MAY_SET)))
    job = round_job(rows, baseline, candidate, out_root, captures=captures, protocol=protocol, gates=gates, retry=retry,
                    runnable=not dry_run)  # fmt: skip
    con = console()
    print_wrapped(con, job.headline())  # a long folder name folds after its separators, never mid-word
    if dry_run:
        for line in job.dry_run_lines():
            print_wrapped(con, f"  {line}", hang=2)
        return
    result = _run_with_progress(job, con)
    folder = job.plan.folder
    decision = receipt_decision(result.receipt, str(folder))
    # the receipt as every terminal shows it (report ROUND --format text): fitted to the width, which phase moved
    # and the phase tables with stamps; receipt.md holds the markdown table to paste into a PR
    render_round(result.receipt, decision, con, result.phases)
    phases = ", phases.md" if result.phases is not None else ""
    print_wrapped(con, f"receipts: {folder}/receipt.md (to paste into a PR), receipt.csv, receipt.json, "
                       f"report.html{phases}")  # fmt: skip
    gate(decision, fail_on)  # a CI gate on what the receipt states


def _say(con: Console, text: str) -> None:
    con.print(text, highlight=False, markup=False)


def _refuse_given(given: list[str]) -> None:
    if given:
        raise TraceattrError(
            f"--retry takes rows, arms, protocol and gates from the receipt; drop {', '.join(given)} "
            "(--captures and --out-root may change)"
        )


def _run_with_progress(job: RoundJob, con: Console) -> RoundResult:
    """Run the round with a progress bar on stderr (a terminal only: one step per row and capture, the runner's
    lines dimmed above it); elsewhere the runner's lines alone, on stdout, so a log holds no bar frames."""
    err = Console(stderr=True)
    if not err.is_terminal:

        def log_line(line: str) -> None:
            if parse(line) is not None:
                _say(con, line)

        return job.run(log_line, lambda _what: None)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        task = progress.add_task("starting nsys …", total=job.steps)

        def on_line(line: str) -> None:
            if parse(line) is not None:
                progress.console.print(line, style="dim", highlight=False, markup=False)

        def on_progress(what: str) -> None:
            progress.update(task, advance=1, description=what)

        return job.run(on_line, on_progress)
