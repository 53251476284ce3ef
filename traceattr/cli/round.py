"""``traceattr round``: A/B one arm against another over a row set, with gates and receipts."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from traceattr.analysis.rounds import Gates, Receipt
from traceattr.cli import app, options_given
from traceattr.core.errors import TraceattrError
from traceattr.jobs.round import (
    ROW_SETS,
    CaptureRequest,
    RoundPlan,
    folder_name,
    read_receipt,
    read_rows,
    retry_plan,
    run_round,
)
from traceattr.present.console import console
from traceattr.present.receipt import markdown, protocol_text

_RETRY_MAY_SET = {"retry", "rounds", "out_root", "dry_run"}


@app.command("round")
def round_command(
    ctx: typer.Context,
    rows: Annotated[
        Optional[str],
        typer.Option("--rows", help=f"File of shapes (one a line) or a named set: {', '.join(ROW_SETS)}."),
    ] = None,
    baseline: Annotated[Optional[str], typer.Option("--baseline", help="The shipped arm (e.g. fa3).")] = None,
    candidate: Annotated[
        Optional[str], typer.Option("--candidate", help="The lever (e.g. 'fa3\\[splits=4]'; A/A: again=fa3).")
    ] = None,
    rounds: Annotated[
        Optional[int], typer.Option(help="Separate captures; arm order alternates between them. [default: 3]")
    ] = None,
    iters: Annotated[
        int, typer.Option(help="ABBA iterations per capture (each arm once per iteration); the minimum.")
    ] = 20,
    max_noise: Annotated[
        float,
        typer.Option(
            help="Add iterations (ten at a time) until every arm's median in the capture is this precise: half "
            "its 95% interval as a fraction (0: exactly --iters)."
        ),
    ] = 0.005,
    max_iters: Annotated[int, typer.Option(help="Never more ABBA iterations per capture than this.")] = 500,
    hold: Annotated[
        bool,
        typer.Option(
            "--hold/--no-hold",
            help="Hold the GPU before each ABBA group until the host has enqueued the whole group (released by "
            "the host), so no call waits for its own launch.",
        ),
    ] = True,
    lead: Annotated[
        bool,
        typer.Option(
            "--lead/--no-lead",
            help="Open each ABBA group with an untimed call of its last arm, so no timed call is the first after "
            "an idle GPU (which ran faster on the H200).",
        ),
    ] = True,
    hold_us: Annotated[
        Optional[float], typer.Option("--hold-us", hidden=True, help="Deprecated: > 0 is --hold, 0 is --no-hold.")
    ] = None,
    warmup: Annotated[int, typer.Option(help="Untimed calls per arm after validation.")] = 3,
    graphs: Annotated[bool, typer.Option("--graphs", help="Replay each call as a captured CUDA graph.")] = False,
    between: Annotated[
        str,
        typer.Option(help="What runs before every call: flush (cold L2), flush+ARM (then one call of ARM), or none."),
    ] = "flush",
    flush_mb: Annotated[
        Optional[int], typer.Option(help="L2 flush buffer in MB (default: 2× L2, at least 128).")
    ] = None,
    sensitivity: Annotated[
        bool, typer.Option("--sensitivity", help="Also time each row back to back and report how far the ratio moves.")
    ] = False,
    directional_limit: Annotated[
        float, typer.Option(help="Refuse a row when |ratio(baseline first) − ratio(candidate first)| exceeds this.")
    ] = 0.02,
    min_clock: Annotated[
        float, typer.Option(help="Refuse a row whose loaded SM clock / max is below this (0: gate off).")
    ] = 0.70,
    parity: Annotated[
        bool, typer.Option(help="Gate on output parity (bitwise for arms declared the same program).")
    ] = True,
    same_within: Annotated[float, typer.Option(help="'same' when the interval lies within 1 ± this.")] = 0.01,
    confidence: Annotated[float, typer.Option(help="Confidence level of the ratio's interval.")] = 0.95,
    seed: Annotated[int, typer.Option(help="Seed of the random inputs.")] = 0,
    retry: Annotated[
        Optional[Path],
        typer.Option("--retry", help="A receipt.json (or its round folder): re-measure its refused rows."),
    ] = None,
    out_root: Annotated[Path, typer.Option("--out-root", help="Round folders are created here.")] = Path("reports"),
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the captures a round would run and stop.")] = False,
) -> None:
    """A/B a candidate arm against a baseline over a row set: per-row ratio, verdict and gates, PR-ready receipts.

    Example: traceattr round --rows decode-h200 --baseline fa3 --candidate 'fa3\\[splits=4]'
    """
    previous = None
    if retry is not None:
        previous, plan = _retry(ctx, retry, rounds, out_root)
    else:
        plan = _new_plan(
            rows, baseline, candidate, out_root, rounds=rounds, iters=iters, max_noise=max_noise, max_iters=max_iters,
            hold=hold if hold_us is None else hold_us > 0, lead=lead, warmup=warmup, graphs=graphs, between=between, flush_mb=flush_mb,
            sensitivity=sensitivity, seed=seed,
            gates=(directional_limit, min_clock, parity, confidence, same_within),
        )  # fmt: skip
    con = console()
    requests = plan.requests()
    if not dry_run:
        _require_runnable(plan, requests)  # before the round folder exists: a refused round leaves nothing behind
    con.print(
        f"{plan.candidate} vs {plan.baseline}: {len(plan.rows)} rows × {len(requests)} captures → {plan.folder}",
        highlight=False,
        markup=False,
    )
    if dry_run:
        _show_dry_run(plan, requests, con)
        return
    try:
        receipt = _run_with_progress(plan, len(requests), previous, con)
    except BaseException:
        with contextlib.suppress(OSError):  # an empty round folder says nothing; one with a capture is kept
            plan.folder.rmdir()
        raise
    con.print(markdown(receipt), highlight=False, markup=False)
    con.print(
        f"receipts: {plan.folder}/receipt.md, receipt.csv, receipt.json, report.html", highlight=False, markup=False
    )


def _require_runnable(plan: RoundPlan, requests: list[CaptureRequest]) -> None:
    """One line, exit 2, when the first capture could not run here (no GPU, no nsys, no backend for the arms)."""
    from traceattr.core.shapes import parse_shape
    from traceattr.jobs.profile import make_plan, require_runnable

    first = requests[0]
    require_runnable(make_plan([parse_shape(s) for s in first.shapes], first.arms, iters=plan.iters,
                               warmup=plan.warmup, between=plan.between, out_root=first.folder.parent))  # fmt: skip


def _retry(ctx: typer.Context, retry: Path, rounds: int | None, out_root: Path) -> tuple[Receipt, RoundPlan]:
    """The receipt to retry and the plan that re-measures its refused rows."""
    # a retry measures as the round did, or its attempts could not sit in one receipt
    given = options_given(ctx, (name for name in ctx.params if name not in _RETRY_MAY_SET))
    if given:
        raise TraceattrError(
            f"--retry takes rows, arms, protocol and gates from the receipt; drop {', '.join(given)} "
            "(--rounds and --out-root may change)"
        )
    previous = read_receipt(retry)
    return previous, retry_plan(previous, out_root, rounds=rounds)


def _new_plan(
    rows: str | None, baseline: str | None, candidate: str | None, out_root: Path, *, rounds: int | None, iters: int,
    max_noise: float, max_iters: int, hold: bool, lead: bool, warmup: int, graphs: bool, between: str, flush_mb: int | None,
    sensitivity: bool, seed: int, gates: tuple[float, float, bool, float, float],
) -> RoundPlan:  # fmt: skip
    """The plan of a new round from the options; every range is checked here, before any capture."""
    missing = [name for name, v in (("--rows", rows), ("--baseline", baseline), ("--candidate", candidate)) if not v]
    if missing:
        raise TraceattrError(f"missing {', '.join(missing)} (or --retry RECEIPT)")
    assert rows and baseline and candidate
    try:
        checked = Gates(*gates)
    except ValueError as err:
        raise TraceattrError(str(err)) from None
    return RoundPlan(
        rows=read_rows(rows), baseline=baseline, candidate=candidate,
        folder=folder_name(out_root, baseline, candidate), rounds=3 if rounds is None else rounds, iters=iters,
        max_noise=max_noise or None, max_iters=max_iters if max_noise else None, hold=hold, lead=lead,
        warmup=warmup, graphs=graphs, between=between, flush_bytes=flush_mb * (1 << 20) if flush_mb else None,
        sensitivity=sensitivity, seed=seed, gates=checked, rows_source=rows,
    )  # fmt: skip


def _show_dry_run(plan: RoundPlan, requests: list[CaptureRequest], con: Console) -> None:
    con.print(f"  {protocol_text(plan.header())}", highlight=False, markup=False, soft_wrap=True)
    for r in requests:
        what = "back to back" if r.order == "blocked" else f"round {r.round + 1}, ABBA"
        con.print(f"  {r.folder.name}: {what}, first arm {r.arms[0]}", highlight=False, markup=False)
    for row in plan.rows:
        con.print(f"  row {row.label} = {row.shape}", highlight=False, markup=False)


def _run_with_progress(plan: RoundPlan, captures: int, previous: Receipt | None, con: Console) -> Receipt:
    """Run the round with a progress bar: one step per row and capture, nsys's own lines dimmed above it."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=con, transient=False) as progress:
        task = progress.add_task("starting nsys …", total=len(plan.rows) * captures)

        def on_line(line: str) -> None:
            if line.startswith("[traceattr] "):
                progress.console.print(line, style="dim", highlight=False, markup=False)

        def on_progress(what: str) -> None:
            progress.update(task, advance=1, description=what)

        receipt = run_round(plan, on_line=on_line, on_progress=on_progress, previous=previous, report=True)
        progress.update(task, completed=len(plan.rows) * captures, description="done")
    return receipt
