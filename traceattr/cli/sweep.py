"""``traceattr sweep``: bracket where the faster arm changes along ctx, by bisection (one capture per step)."""

from __future__ import annotations

import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape

from traceattr.cli import app
from traceattr.core import runfolder
from traceattr.jobs.crossover_search import SearchPlan, ctx_range, run_search
from traceattr.jobs.profile import make_plan, require_runnable


@app.command("sweep")
def sweep_command(
    family: Annotated[str, typer.Option("--family", "-s", "--shape", help="Shape family with ctx left open: q8_ctx*.")],
    arm: Annotated[
        list[str], typer.Option("--backend", "-b", "--arm", help="Arm (repeat, two or more): fa3, flashmla …")
    ],
    ctx_range_text: Annotated[str, typer.Option("--ctx-range", help="Context lengths searched, LOW:HIGH (8k:1m).")],
    width: Annotated[
        float, typer.Option(help="Stop when the crossover is bracketed within ± this fraction of its ctx.")
    ] = 0.1,
    max_steps: Annotated[
        Optional[int],
        typer.Option(
            help="Captures at most, the first (both ends) included. Default: what --width and --ctx-range need "
            "(1 + the halvings of log ctx that reach the width + 2 retries of refused points)."
        ),
    ] = None,
    graphs: Annotated[
        bool, typer.Option("--graphs", help="Replay each call as a CUDA graph (a separate answer).")
    ] = False,
    iters: Annotated[int, typer.Option(help="Timed rounds per step (a minimum with --max-noise).")] = 20,
    warmup: Annotated[int, typer.Option(help="Untimed calls per arm after validation.")] = 3,
    max_noise: Annotated[
        float, typer.Option(help="Add rounds until each arm's median is this precise (fraction; 0: exactly --iters).")
    ] = 0.005,
    max_iters: Annotated[int, typer.Option(help="With --max-noise: never more rounds than this.")] = 500,
    hold_us: Annotated[float, typer.Option(help="µs of GPU hold per call before each ABBA group.")] = 100.0,
    between: Annotated[
        str, typer.Option(help="What runs before every timed call: flush, flush+ARM or none.")
    ] = "flush",
    seed: Annotated[int, typer.Option(help="Seed of the random inputs.")] = 0,
    out_root: Annotated[Path, typer.Option("--out-root", help="The sweep folder is created here.")] = Path("reports"),
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the search's plan and stop.")] = False,
) -> None:
    """Find where the faster of two or more arms changes along ctx: measure both ends, then bisect in log ctx.

    Example: traceattr sweep -s 'q8_ctx*' -b fa3 -b flashmla --ctx-range 8k:1m --width 0.1

    Each step is one `profile` capture with a round's gates; a refused point (an end too) is measured
    once more. The sweep folder holds step-1, step-2, … (run folders), search.json and report.html.
    Eager and --graphs are separate searches. `traceattr dispatch SWEEP_FOLDER …` turns sweeps into a
    dispatch table; `traceattr report SWEEP_FOLDER` writes the page again.
    """
    low, high = ctx_range(ctx_range_text)
    mode = "graphs" if graphs else "eager"
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "", family.replace("*", "x"))
    folder = out_root / f"{time.strftime('%Y%m%d-%H%M%S')}_sweep_{safe}_{mode}"
    plan = SearchPlan(
        family=family, arms=tuple(arm), ctx_low=low, ctx_high=high, folder=folder, width=width, max_steps=max_steps,
        iters=iters, warmup=warmup, max_noise=max_noise or None, max_iters=max_iters if max_noise else None,
        hold_us=hold_us, graphs=graphs, between=between, seed=seed,
    )  # fmt: skip
    from traceattr.present.console import console
    from traceattr.present.crossover_search import render_steps
    from traceattr.present.terminal import render_plan

    con = console()
    first = make_plan(
        list(plan.shapes(low, high)), plan.request(1, (low, high)).arms, iters=iters, warmup=warmup,
        max_noise=plan.max_noise, max_iters=plan.max_iters, hold_us=hold_us, graphs=graphs, between=between, seed=seed,
    )  # fmt: skip
    first = replace(first, folder=plan.request(1, (low, high)).folder)  # step 1: both ends in one capture
    con.print(escape(f"search {family} over {low:,}–{high:,} ctx ({mode}): {', '.join(plan.labels)}; "
                     f"±{width:g} of ctx, at most {plan.budget} captures; folder {folder}"), soft_wrap=True)  # fmt: skip
    render_plan(first, con)
    if dry_run:
        return
    require_runnable(first)

    def show(step: dict[str, Any]) -> None:
        for p in step["points"]:
            con.print(escape(f"step {step['step']}: {p['shape']} {p['side']} (ratio {p.get('ratio')}, "
                             f"{p['status']}) → {step['decision']['kind']} {step['decision'].get('next_ctx') or ''}"),
                      highlight=False)  # fmt: skip

    with con.status("sweeping …"):
        record = run_search(plan, on_step=show)
    render_steps(record, con)
    from traceattr.present.report.sweep import write_sweep_report

    page = write_sweep_report(record, folder / runfolder.REPORT, f"traceattr sweep {folder.name}")
    con.print(f"sweep folder: {folder} (report: {page.name})", markup=False, highlight=False)
