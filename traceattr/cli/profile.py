"""``traceattr profile`` and ``traceattr shapes``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from traceattr.backends.arms import GENERIC_OPTIONS
from traceattr.cli import app, options_given
from traceattr.core.errors import TraceattrError
from traceattr.core.shapes import parse_shape
from traceattr.jobs.profile import ProfilePlan, ProfileResult, execute, make_plan, require_runnable
from traceattr.present.comparison import render_summary
from traceattr.present.console import console
from traceattr.present.terminal import render_plan


@app.command("profile")
def profile_command(
    ctx: typer.Context,
    shape: Annotated[
        list[str], typer.Option("--shape", "-s", help="Shape to time, e.g. q8_ctx900k (repeat for a sweep).")
    ],
    backend: Annotated[
        Optional[list[str]],
        typer.Option(
            "--backend",
            "-b",
            "--arm",
            # \\[ keeps typer's rich help from reading [label=] and [options] as markup (and dropping them)
            help="Arm to time (repeatable): \\[label=]backend\\[options], e.g. fa3, 'fa3\\[splits=4]', "
            f"'flashmla\\[graphs]', cand=my_pkg.my_mod:MyBackend; options every backend takes: "
            f"{', '.join(o.name for o in GENERIC_OPTIONS)}. Default: every registered backend.",
        ),
    ] = None,
    iters: Annotated[int, typer.Option(help="Timed rounds; every arm runs once per round.")] = 20,
    warmup: Annotated[int, typer.Option(help="Untimed calls per arm after validation.")] = 3,
    max_noise: Annotated[
        Optional[float],
        typer.Option(
            help="Make --iters a minimum: add rounds (abba) until every arm's median is this precise, as a "
            "fraction (0.005: the 95% interval of the median within ±0.5%)."
        ),
    ] = None,
    max_iters: Annotated[
        Optional[int], typer.Option(help="With --max-noise: never more rounds than this. [default: 500]")
    ] = None,
    hold_us: Annotated[
        float,
        typer.Option(
            help="µs per call of GPU spin before each group of calls, so the host enqueues the group before the "
            "GPU reaches it (no call waits for its own launch; traceattr round holds 100)."
        ),
    ] = 0.0,
    lead: Annotated[
        bool,
        typer.Option(
            "--lead/--no-lead",
            help="Open each group of timed calls with an untimed call of its last arm, so no timed call is the "
            "first after an idle GPU.",
        ),
    ] = True,
    graphs: Annotated[bool, typer.Option("--graphs", help="Replay each call as a captured CUDA graph.")] = False,
    shuffle: Annotated[
        bool, typer.Option("--shuffle-pages", help="Scatter each request's KV pages over the cache.")
    ] = False,
    seed: Annotated[int, typer.Option(help="Seed of the random inputs and of the page shuffle.")] = 0,
    validate: Annotated[bool, typer.Option(help="Check outputs against the torch reference before timing.")] = True,
    flush_mb: Annotated[
        Optional[int], typer.Option(help="L2 flush buffer in MB (default: 2× L2, at least 128).")
    ] = None,
    between: Annotated[
        str,
        typer.Option(
            help="What runs before every timed call: flush (the L2 flush), flush+ARM (the flush, then ARM's "
            "call, so every arm follows the same kernel) or none."
        ),
    ] = "flush",
    order: Annotated[
        str, typer.Option(help="abba: arms interleaved, reversed every other round; blocked: each arm back to back.")
    ] = "abba",
    out_root: Annotated[Path, typer.Option("--out-root", help="Run folders are created here.")] = Path("reports"),
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the plan (backends, tensors, nsys command) and stop.")
    ] = False,
    arch: Annotated[
        Optional[str],
        typer.Option(
            help="With --dry-run: plan for this GPU instead of this machine's (sm_100: a B200; sm_90: an H200), "
            "installed packages unchecked."
        ),
    ] = None,
    ranks: Annotated[
        Optional[int],
        typer.Option(
            help="Real DCP ranks: one process per GPU under its own nsys, all-gather over NCCL and merge; "
            "the shape must say dcp<N> with N = --ranks; one report per rank, attributed together."
        ),
    ] = None,
) -> None:
    """Time isolated MLA decode calls of every available backend under nsys, and attribute them.

    Example: traceattr profile --shape q8_ctx900k --shape q1_ctx131k
    Real ranks: traceattr profile --shape q8_ctx1m_dcp2 --ranks 2 (one GPU each)
    """
    shapes = [parse_shape(s) for s in shape]
    if arch is not None and (not dry_run or ranks is not None):
        raise TraceattrError(
            "--arch plans for a GPU this machine may not have: it goes with --dry-run (without --ranks)"
        )
    if ranks is not None:
        # the ranks runner times eager calls with the flush only: an option it would ignore is refused
        unused = options_given(
            ctx, ("graphs", "shuffle", "between", "order", "max_noise", "max_iters", "hold_us", "lead"), changed=True
        )
        if unused:
            raise TraceattrError(f"--ranks does not take {', '.join(unused)} (each rank times eager calls after an "
                                 "L2 flush, --iters of them)")  # fmt: skip
        _profile_ranks(shapes, ranks, backend, iters=iters, warmup=warmup, seed=seed, validate=validate,
                       flush_mb=flush_mb, out_root=out_root, dry_run=dry_run)  # fmt: skip
        return
    plan = make_plan(
        shapes, backend, iters=iters, warmup=warmup, max_noise=max_noise, max_iters=max_iters, hold_us=hold_us,
        lead=lead, graphs=graphs, shuffle=shuffle, seed=seed, validate=validate,
        flush_bytes=flush_mb * (1 << 20) if flush_mb is not None else None, between=between, order=order,
        out_root=out_root, arch=arch,
    )  # fmt: skip
    con = console()
    if dry_run:
        render_plan(plan, con)
        return
    require_runnable(plan)
    render_plan(plan, con)
    with con.status("starting nsys …") as status:

        def show(line: str) -> None:
            if line.startswith("[traceattr] "):
                status.update(escape(line.removeprefix("[traceattr] ")))
                con.print(line, style="dim", highlight=False, markup=False)

        result = execute(plan, on_line=show)
    _show_result(plan, result, con)


def _show_result(plan: ProfilePlan, result: ProfileResult, con: Console) -> None:
    """The summary table, every arm that did not run and why, a low-clock note, the run folder."""
    unavailable = [(a.shape, a.backend, a.reason) for a in plan.availability if a.reason]
    for shape_name, report in result.runner.shapes.items():
        for name, entry in report.backends.items():
            if entry.status in ("wrong", "failed"):
                unavailable.append((shape_name, name, f"{entry.status}: {entry.reason}"))
    render_summary(result.summary, con, unavailable)
    if result.runner.low_clock_mhz is not None:
        con.print(f"[yellow]note:[/yellow] median SM clock {result.runner.low_clock_mhz} MHz is below 90% of max")
    con.print(f"run folder: {result.folder}", markup=False, highlight=False)


def _profile_ranks(
    shapes: list, ranks: int, backend: list[str] | None, *, iters: int, warmup: int, seed: int, validate: bool,
    flush_mb: int | None, out_root: Path, dry_run: bool,
) -> None:  # fmt: skip
    from traceattr.jobs.many import Settings, across_reports, combine, parts_folder, run_reports, write_combined
    from traceattr.jobs.rank_runs import execute_ranks, make_ranks_plan
    from traceattr.present.terminal import render_across, render_reports

    if len(shapes) != 1 or (backend is not None and len(backend) != 1):
        raise TraceattrError("--ranks runs one shape and one backend at a time")
    plan = make_ranks_plan(
        shapes[0], ranks, backend[0] if backend else "fa3", iters=iters, warmup=warmup, seed=seed, validate=validate,
        flush_bytes=flush_mb * (1 << 20) if flush_mb else None, out_root=out_root,
    )  # fmt: skip
    con = console()
    con.print(plan.describe(), markup=False, highlight=False)
    if dry_run:
        return
    _require_gpu(plan.nsys is not None)
    with con.status(f"{ranks} ranks under nsys …"):
        exports = execute_ranks(plan)
    with parts_folder(plan.folder) as parts:
        combined = combine(run_reports(exports, Settings(domain="traceattr"), workers=len(exports), parts=parts))
        written = write_combined(combined, plan.folder, "parquet")
    for reason in combined.failures:
        con.print(Text.assemble(("error:", "red"), f" {reason}"))
    render_reports(combined.reports, con)
    render_across(across_reports(combined.ranges, "name"), con, "name")
    con.print(f"run folder: {plan.folder} ({', '.join(w.name for w in written)})", markup=False, highlight=False)


def _require_gpu(nsys_found: bool) -> None:
    """Refused before nsys starts (no run folder, no rank logs) when this machine cannot run a capture."""
    from traceattr.backends import current_device

    hint = "without a GPU, analyse a capture made elsewhere with `traceattr attribute TRACE.sqlite`"
    device, problem = current_device()
    if device is None:
        raise TraceattrError(f"cannot profile: {problem}; {hint}")
    if not nsys_found:
        raise TraceattrError(f"cannot profile: Nsight Systems (nsys) not found (set TRACEATTR_NSYS); {hint}")
