"""``traceattr round``: A/B one arm against another over a row set, with gates and receipts."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from traceattr.analysis.round_decision import receipt_decision
from traceattr.analysis.rounds import Gates, Receipt
from traceattr.cli import app, options_given
from traceattr.cli.decide import FailOnOpt, check_fail_on, gate
from traceattr.cli.options import GatesOption, protocol_options
from traceattr.core.errors import TraceattrError
from traceattr.core.progress import parse
from traceattr.core.protocol import ROUND, ROUNDS, Protocol
from traceattr.jobs.round import (
    ROW_SETS,
    CaptureRequest,
    RoundPlan,
    plan_retry,
    plan_round,
    require_runnable,
    run_round,
)
from traceattr.present.console import console
from traceattr.present.receipt import markdown, protocol_text

_RETRY_MAY_SET = {"retry", "rounds", "out_root", "dry_run"}


RowsOpt = Annotated[
    Optional[str], typer.Option("--rows", help=f"File of shapes (one a line) or a named set: {', '.join(ROW_SETS)}.")
]
BaselineOpt = Annotated[Optional[str], typer.Option("--baseline", help="The shipped arm (e.g. fa3).")]
CandidateOpt = Annotated[
    Optional[str], typer.Option("--candidate", help="The lever (e.g. 'fa3\\[splits=4]'; A/A: again=fa3).")
]
RoundsOpt = Annotated[
    Optional[int], typer.Option(help=f"Separate captures; arm order alternates between them. \\[default: {ROUNDS}]")
]
RetryOpt = Annotated[
    Optional[Path], typer.Option("--retry", help="A receipt.json (or its round folder): re-measure its refused rows.")
]
OutRootOpt = Annotated[Path, typer.Option("--out-root", help="Round folders are created here.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Print the captures a round would run and stop.")]


@app.command("round")
@protocol_options("round")
def round_command(
    ctx: typer.Context, rows: RowsOpt = None, baseline: BaselineOpt = None, candidate: CandidateOpt = None,
    rounds: RoundsOpt = None, protocol: Protocol = ROUND, gates: GatesOption = Gates, retry: RetryOpt = None,
    out_root: OutRootOpt = Path("reports"), dry_run: DryRunOpt = False, fail_on: FailOnOpt = [],  # noqa: B006
) -> None:  # fmt: skip
    """A/B a candidate arm against a baseline over a row set: per-row ratio, verdict and gates, PR-ready receipts.

    Example: traceattr round --rows decode-h200 --baseline fa3 --candidate 'fa3\\[splits=4]'
    """
    previous = None
    check_fail_on(fail_on)
    if retry is not None:
        # a retry measures as the round did, or its attempts could not sit in one receipt
        _refuse_given(options_given(ctx, (name for name in ctx.params if name not in _RETRY_MAY_SET)))
        previous, plan = plan_retry(retry, out_root, rounds=rounds)
    else:
        rows, baseline, candidate = _required(rows, baseline, candidate)
        plan = plan_round(rows, baseline, candidate, out_root, rounds=rounds, protocol=protocol, gates=gates())
    con = console()
    requests = plan.requests()
    if not dry_run:
        require_runnable(plan)  # before the round folder exists: a refused round leaves nothing behind
    _say(con, f"{plan.candidate} vs {plan.baseline}: {len(plan.rows)} rows × {len(requests)} captures → {plan.folder}")
    if dry_run:
        _show_dry_run(plan, requests, con)
        return
    try:
        receipt = _run_with_progress(plan, len(requests), previous, con)
    except BaseException:
        with contextlib.suppress(OSError):  # an empty round folder says nothing; one with a capture is kept
            plan.folder.rmdir()
        raise
    _say(con, markdown(receipt))
    _say(con, f"receipts: {plan.folder}/receipt.md, receipt.csv, receipt.json, report.html")
    gate(receipt_decision(receipt, str(plan.folder)), fail_on)  # a CI gate on what the receipt states


def _say(con: Console, text: str) -> None:
    con.print(text, highlight=False, markup=False)


def _required(rows: str | None, baseline: str | None, candidate: str | None) -> tuple[str, str, str]:
    missing = [name for name, v in (("--rows", rows), ("--baseline", baseline), ("--candidate", candidate)) if not v]
    if missing or not (rows and baseline and candidate):
        raise TraceattrError(f"missing {', '.join(missing)} (or --retry RECEIPT)")
    return rows, baseline, candidate


def _refuse_given(given: list[str]) -> None:
    if given:
        raise TraceattrError(
            f"--retry takes rows, arms, protocol and gates from the receipt; drop {', '.join(given)} "
            "(--rounds and --out-root may change)"
        )


def _show_dry_run(plan: RoundPlan, requests: list[CaptureRequest], con: Console) -> None:
    con.print(f"  {protocol_text(plan.header())}", highlight=False, markup=False, soft_wrap=True)
    for r in requests:
        what = "back to back" if r.order == "blocked" else f"round {r.round + 1}, ABBA"
        con.print(f"  {r.folder.name}: {what}, first arm {r.arms[0]}", highlight=False, markup=False)
    for row in plan.rows:
        con.print(f"  row {row.label} = {row.shape}", highlight=False, markup=False)


def _run_with_progress(plan: RoundPlan, captures: int, previous: Receipt | None, con: Console) -> Receipt:
    """Run the round with a progress bar on stderr (a terminal only: one step per row and capture, the runner's
    lines dimmed above it); elsewhere the runner's lines alone, on stdout, so a log holds no bar frames."""
    err = Console(stderr=True)
    if not err.is_terminal:

        def log_line(line: str) -> None:
            if parse(line) is not None:
                _say(con, line)

        return run_round(plan, on_line=log_line, on_progress=lambda _what: None, previous=previous, report=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        task = progress.add_task("starting nsys …", total=len(plan.rows) * captures)

        def on_line(line: str) -> None:
            if parse(line) is not None:
                progress.console.print(line, style="dim", highlight=False, markup=False)

        def on_progress(what: str) -> None:
            progress.update(task, advance=1, description=what)

        return run_round(plan, on_line=on_line, on_progress=on_progress, previous=previous, report=True)
