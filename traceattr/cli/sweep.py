"""``traceattr sweep``: bracket where the faster arm changes along ctx, by bisection (one capture per step)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

from traceattr.cli import app
from traceattr.cli.options import protocol_options
from traceattr.core import runfolder
from traceattr.core.protocol import SWEEP, Protocol
from traceattr.jobs.profile import require_runnable
from traceattr.jobs.sweep import WIDTH, first_step_plan, plan_sweep, run_sweep

FamilyOpt = Annotated[str, typer.Option("--family", "-s", "--shape", help="Shape family with ctx left open: q8_ctx*.")]
ArmsOpt = Annotated[
    list[str], typer.Option("--backend", "-b", "--arm", help="Arm (repeat, two or more): fa3, flashmla …")
]
CtxRangeOpt = Annotated[str, typer.Option("--ctx-range", help="Context lengths searched, LOW:HIGH (8k:1m).")]
WidthOpt = Annotated[
    float, typer.Option(help="Stop when the crossover is bracketed within ± this fraction of its ctx.")
]
MaxStepsOpt = Annotated[
    Optional[int],
    typer.Option(
        help="Captures at most, the first (both ends) included. Default: what --width and --ctx-range need "
        "(1 + the halvings of log ctx that reach the width + 2 retries of refused points)."
    ),
]
OutRootOpt = Annotated[Path, typer.Option("--out-root", help="The sweep folder is created here.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Print the sweep's plan and stop.")]


@app.command("sweep")
@protocol_options("sweep")
def sweep_command(
    family: FamilyOpt, arm: ArmsOpt, ctx_range_text: CtxRangeOpt, width: WidthOpt = WIDTH, max_steps: MaxStepsOpt = None,
    protocol: Protocol = SWEEP, out_root: OutRootOpt = Path("reports"), dry_run: DryRunOpt = False,
) -> None:  # fmt: skip
    """Find where the faster of two or more arms changes along ctx: measure both ends, then bisect in log ctx.

    Example: traceattr sweep -s 'q8_ctx*' -b fa3 -b flashmla --ctx-range 8k:1m --width 0.1

    Each step is one `profile` capture with a round's gates; a refused point (an end too) is measured
    once more. The sweep folder holds step-1, step-2, … (run folders), sweep.json and report.html.
    Eager and --graphs are separate sweeps. `traceattr dispatch SWEEP_FOLDER …` turns sweeps into a
    dispatch table; `traceattr report SWEEP_FOLDER` writes the page again.
    """
    from traceattr.present.console import console
    from traceattr.present.steps import steps
    from traceattr.present.sweep_view import render_steps
    from traceattr.present.terminal import render_plan

    plan = plan_sweep(family, tuple(arm), ctx_range_text, out_root, width=width, max_steps=max_steps,
                       protocol=protocol)  # fmt: skip
    first = first_step_plan(plan)
    con = console()
    if not dry_run:
        require_runnable(first)  # no GPU: one line, not the whole plan first
    con.print(escape(plan.describe()))
    render_plan(first, con)
    if dry_run:
        return
    with steps(after=0) as step:  # on stderr and a terminal only: a piped log holds the sweep's own lines alone
        step(f"sweep {plan.folder.name}")
        record = run_sweep(plan, on_step=lambda done: _show_step(con, done))
    render_steps(record, con)
    from traceattr.present.report.sweep import write_sweep_report

    page = write_sweep_report(record, plan.folder / runfolder.REPORT, f"traceattr sweep {plan.folder.name}")
    con.print(f"sweep folder: {plan.folder} (report: {page.name})", markup=False, highlight=False)


def _show_step(con: Console, step: dict[str, Any]) -> None:
    from traceattr.present.sweep_view import step_lines

    for line in step_lines(step):
        con.print(escape(line), highlight=False)
